// Waiting in tests: for a while, or until something the test watches comes true.

/** @example await sleep(50); */
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Resolves once condition() holds, polling every 20 ms; throws naming `what` after timeoutMs.
 * @example await until(() => nodeSessions(pipeline) === 0, "the sessions to be freed");
 */
export async function until(condition, what, timeoutMs = 5000) {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}
