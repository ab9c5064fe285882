// The one session of `layerfold chat`, kept from turn to turn: each turn's prompt (the whole
// conversation rendered again) continues it from the longest prefix the two share, so only what
// is new is prefilled. The template does not always render a turn as the model wrote it (Gemma 4
// drops the thought channel, and with thinking off its generation prompt holds an empty one that
// the rendered turn does not), so the session is cut back to the shared prefix however short it
// is: unlike the gateway's SessionCache, there is no other chat to keep it for. It is what a
// Model's runs ask of its sessions (generation/run.js): take, newSession, keep.
import { sharedPrefix } from '../generation/sessions.js';

export class ChatSession {
  #kept = null;  // {session, history: the tokens its cache holds}
  #next = 0;

  /**
   * The kept session for `prompt`, taken while in use -> {session, reused: positions kept (at
   * most all of the prompt but its last token: a step needs a new token), cut: whether the
   * session holds more than those}; a new session when none is kept.
   * @example const { session, reused, cut } = chatSession.take(tokens);
   */
  take(prompt) {
    if (this.#kept === null) return { session: this.newSession(), reused: 0, cut: false };
    const { session, history } = this.#kept;
    this.#kept = null;
    const reused = sharedPrefix(history, prompt, prompt.length - 1);
    return { session, reused, cut: history.length > reused };
  }

  /** A session id no earlier turn used. */
  newSession() {
    return `chat-${this.#next++}`;
  }

  /** Keeps a finished turn's session with the tokens its cache holds, for the next turn. */
  async keep(session, history) {
    this.#kept = { session, history };
  }

  /**
   * Forgets the kept session (the conversation started over); drop(session) forgets it on the nodes.
   * @example await chatSession.forget((session) => pipeline.dropSession(session));
   */
  async forget(drop) {
    if (this.#kept === null) return;
    const { session } = this.#kept;
    this.#kept = null;
    await drop(session);
  }
}
