// How the open web phone makes itself heard: a loud square tone and a vibration, for the ring and
// for each alert of an urgent notification.

/** A tone and a vibration of `seconds`. Without audio here (or before a first tap, when browsers
 * refuse it) the vibration remains; without either, the caller's notification does. */
export function sound(seconds) {
  if (navigator.vibrate) navigator.vibrate(Array.from({ length: seconds }, (_, i) => (i % 2 ? 300 : 700)));
  try {
    const audio = new AudioContext();
    const tone = audio.createOscillator();
    const loud = audio.createGain();
    tone.type = "square";
    tone.frequency.value = 880;
    loud.gain.value = 1;
    tone.connect(loud).connect(audio.destination);
    tone.start();
    tone.stop(audio.currentTime + seconds);
    tone.onended = () => audio.close();
  } catch {
    // No audio here: the vibration and the notification remain.
  }
}
