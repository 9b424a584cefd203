// The /v1 routes the web app calls, with this browser's device credential. An error answer becomes
// an ApiError with the server's stable code, readable message (never its JSON) and details, and for
// a 429 the seconds its Retry-After asks to wait.

export class ApiError extends Error {
  constructor(status, code, message, retryAfter = 0, details = {}) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
    this.details = details;
  }
}

export async function call(method, path, { token, body } = {}) {
  const headers = {};
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch {
    throw new ApiError(0, "offline", "The server could not be reached. Check the connection and try again.");
  }
  if (response.status === 204) return null;
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const error = asError(response.status, data);
    if (response.status === 429) error.retryAfter = Math.max(1, Number(response.headers.get("Retry-After")) || 0);
    throw error;
  }
  return data;
}

function asError(status, data) {
  const error = data && data.error;
  if (error && typeof error === "object") {
    const details = error.details && typeof error.details === "object" ? error.details : {};
    return new ApiError(status, error.code, error.message || error.code, 0, details);
  }
  if (typeof error === "string") return new ApiError(status, error, data.message || "Not allowed.");
  return new ApiError(status, "http_" + status, `The server answered ${status}.`);
}
