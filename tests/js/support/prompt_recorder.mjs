// The prompts a pipeline is given, as whole token lists, for tests that compare them with
// llama.cpp's rendering: each session's tokens are followed through steps and cuts, and what the
// session holds after its first step since it was made or cut (a prompt, or the rest of one after
// a reused prefix) is recorded, or after the step that follows a checkpoint taken on the way (a
// chat's prompt is prefilled in two steps around one). Drafts are cut back too, so this is for
// runs without them.

/**
 * Wraps pipeline's step, truncate, checkpoint and dropSession; returns the array the prompts go into.
 * @example const prompts = recordPrompts(pipeline); await client.chat.completions.create(...); prompts.at(-1)
 */
export function recordPrompts(pipeline) {
  // session -> {tokens, fresh, prompt}: what it holds, whether made or cut since its last step,
  // the index of its prompt while a checkpoint may still extend it
  const held = new Map();
  const prompts = [];
  const {step, truncate, checkpoint, dropSession} = pipeline;
  pipeline.step = function (session, tokens, ...rest) {
    const s = held.get(session) ?? {tokens: [], fresh: true, prompt: null};
    held.set(session, s);
    s.tokens.push(...tokens);
    if (s.fresh) prompts.push([...s.tokens]);
    else if (s.prompt !== null) prompts[s.prompt] = [...s.tokens];
    s.prompt = null;
    s.fresh = false;
    return step.call(this, session, tokens, ...rest);
  };
  pipeline.checkpoint = function (session, ...rest) {
    const s = held.get(session);
    if (s) s.prompt = prompts.length - 1;
    return checkpoint.call(this, session, ...rest);
  };
  pipeline.truncate = function (session, n, ...rest) {
    held.set(session, {tokens: (held.get(session)?.tokens ?? []).slice(0, n), fresh: true, prompt: null});
    return truncate.call(this, session, n, ...rest);
  };
  pipeline.dropSession = function (session, ...rest) {
    held.delete(session);
    return dropSession.call(this, session, ...rest);
  };
  return prompts;
}
