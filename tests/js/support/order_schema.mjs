// The JSON schema of the structured-output tests, in Node and in workerd.

// Nested objects, arrays, enums and required fields; strings, arrays and numbers bounded so a
// random model's text ends (an unbounded string is a coin flip per token among 262144).
export const ORDER_SCHEMA = {
  type: "object",
  properties: {
    id: {type: "integer", minimum: 0, maximum: 999},
    status: {enum: ["open", "shipped", "closed"]},
    customer: {
      type: "object",
      properties: {
        name: {type: "string", maxLength: 6},
        vip: {type: "boolean"},
      },
      required: ["name", "vip"],
      additionalProperties: false,
    },
    items: {
      type: "array",
      items: {
        type: "object",
        properties: {sku: {enum: ["a1", "b2", "c3"]}, qty: {type: "integer", minimum: 1, maximum: 9}},
        required: ["sku", "qty"],
        additionalProperties: false,
      },
      minItems: 1,
      maxItems: 3,
    },
    note: {anyOf: [{type: "string", maxLength: 4}, {type: "null"}]},
  },
  required: ["id", "status", "customer", "items"],
  additionalProperties: false,
};
