// How the open web phone makes itself heard: a loud square tone and a vibration, for the ring and
// for each alert of an urgent notification, and a way to stop them. Browsers refuse sound (and
// vibration) until the person has tapped the page once; `blocked()` says so, and `unlock()`, run
// from a tap, opens the one audio context every later alarm plays through.

let audio = null;
let playing = null; // {tone, timer} of the alarm sounding now

/** Whether the person has tapped the page since it opened (before that, browsers refuse both). */
function activated() {
  return navigator.userActivation ? navigator.userActivation.hasBeenActive : true;
}

/** The audio context, made only after a tap (made before, the browser complains and mutes it). */
function context() {
  if (!audio && activated() && typeof AudioContext === "function") audio = new AudioContext();
  return audio;
}

/** True while the browser would play nothing: no tap on the page yet, or no audio at all. */
export function blocked() {
  return !activated() || !context() || context().state !== "running";
}

/** From a tap: let alarms sound from now on. Resolves true when they can. */
export async function unlock() {
  const made = context();
  if (!made) return false;
  try {
    await made.resume();
  } catch {
    return false;
  }
  return made.state === "running";
}

/** A tone and a vibration of `seconds`, replacing any alarm sounding now. Never throws: without
 * sound here the vibration remains, without either the caller's notification does. */
export function sound(seconds) {
  stop();
  if (!activated()) return;
  try {
    if (navigator.vibrate) navigator.vibrate(Array.from({ length: seconds }, (_, i) => (i % 2 ? 300 : 700)));
  } catch {
    // Vibration refused: the tone and the notification remain.
  }
  try {
    const made = context();
    if (!made || made.state !== "running") return;
    const tone = made.createOscillator();
    const loud = made.createGain();
    tone.type = "square";
    tone.frequency.value = 880;
    loud.gain.value = 1;
    tone.connect(loud).connect(made.destination);
    tone.start();
    tone.stop(made.currentTime + seconds);
    playing = { tone, timer: setTimeout(() => (playing = null), seconds * 1000) };
  } catch {
    // No audio here: the vibration and the notification remain.
  }
}

/** Silence the alarm sounding now, tone and vibration. */
export function stop() {
  if (playing) {
    clearTimeout(playing.timer);
    try {
      playing.tone.stop();
    } catch {
      // Already stopped.
    }
    playing = null;
  }
  try {
    if (navigator.vibrate && activated()) navigator.vibrate(0);
  } catch {
    // Nothing was vibrating.
  }
}
