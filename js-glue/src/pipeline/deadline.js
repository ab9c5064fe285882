// A deadline for one HTTP call and the read of its answer.

/**
 * A signal aborted when `signal` (if any) is, or after `ms` with a TimeoutError: what
 * AbortSignal.any over AbortSignal.timeout gives, but held by its own timer until that fires. On
 * Node 20 a garbage collection can take that pair from under a pending fetch, which then never
 * ends (nodejs/undici#4068); this one cannot be collected before its time. The timer does not
 * keep a Node process alive.
 * @example const response = await fetch(url, { signal: deadlineSignal(request.signal, 30_000) });
 */
export function deadlineSignal(signal, ms) {
  const timeout = new AbortController();
  const combined = signal ? AbortSignal.any([signal, timeout.signal]) : timeout.signal;
  const timer = setTimeout(() => {
    void combined;  // held here, so that nothing of the pair is collected while the call runs
    timeout.abort(new DOMException(`no answer within ${ms} ms`, 'TimeoutError'));
  }, ms);
  timer.unref?.();  // a number in workerd
  return combined;
}
