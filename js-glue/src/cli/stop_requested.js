// When a long-running command (serve, gateway) is asked to stop: SIGTERM or SIGINT, or, run
// through npm's wrapper (`npx layerfold …`, `npm exec`, an npm script), its parent going away.
// npm passes a SIGTERM on to the shell it runs the command in, and that shell dies of it without
// passing it on: the server would go on, orphaned, holding its port. Started otherwise (a daemon
// put in the background with `&` or nohup), a server outlives its parent, as servers do.

const PARENT_POLL_MS = 250;

/**
 * Resolves with what asked the command to stop: 'SIGTERM', 'SIGINT' or 'parent gone'.
 * @example const reason = await stopRequested();
 */
export function stopRequested() {
  return new Promise((resolve) => {
    for (const signal of ['SIGTERM', 'SIGINT']) process.once(signal, () => resolve(signal));
    const parent = process.ppid;
    if (process.env.npm_lifecycle_event === undefined || parent <= 1) return;
    const timer = setInterval(() => {
      if (alive(parent)) return;
      clearInterval(timer);
      resolve('parent gone');
    }, PARENT_POLL_MS);
    timer.unref();
  });
}

// Signal 0 checks that the process exists; EPERM: it does, owned by another user.
function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === 'EPERM';
  }
}
