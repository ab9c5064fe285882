// The shapes of a request body's values, as the request checks (params.js, chat_messages.js,
// tools.js, thinking.js) ask of them.

/** A plain JSON object: not null, not an array. */
export const isObject = (v) => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A field the client sent a value for (JSON null counts as absent, as OpenAI reads it). */
export const given = (v) => v !== undefined && v !== null;
