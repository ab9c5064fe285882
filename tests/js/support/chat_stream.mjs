// What the gateway tests make of a streamed chat completion: the chunks put together as the
// openai client's users do.

/**
 * Chunks -> {content, reasoning_content, tool_calls, finish_reason}: content and reasoning
 * appended, each call's pieces joined by index.
 * @example const whole = assemble(chunks); assert.equal(whole.finish_reason, "tool_calls");
 */
export function assemble(chunks) {
  const out = {content: "", reasoning_content: "", tool_calls: [], finish_reason: null};
  for (const chunk of chunks) {
    const [choice] = chunk.choices;
    if (!choice) continue;
    const d = choice.delta;
    out.content += d.content ?? "";
    out.reasoning_content += d.reasoning_content ?? "";
    for (const piece of d.tool_calls ?? []) {
      const call = (out.tool_calls[piece.index] ??= {id: "", type: "", function: {name: "", arguments: ""}});
      if (piece.id) call.id = piece.id;
      if (piece.type) call.type = piece.type;
      call.function.name += piece.function?.name ?? "";
      call.function.arguments += piece.function?.arguments ?? "";
    }
    if (choice.finish_reason) out.finish_reason = choice.finish_reason;
  }
  return out;
}
