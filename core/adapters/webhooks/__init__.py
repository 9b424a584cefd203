"""Answer callbacks' outbound side: resolving a receiver's host and POSTing to it, guarded against
server-side request forgery."""
