// serve's and gateway's configuration as the CLI makes it: the command line's values (text, as
// parseArgs gives them) and the environment read against the command's options, then mapped.
import {GATEWAY_OPTIONS, gatewayConfig} from "../../../js-glue/src/cli/gateway.js";
import {readOptions} from "../../../js-glue/src/cli/options/read_options.js";
import {SERVE_OPTIONS, serveConfig} from "../../../js-glue/src/cli/serve.js";

/** @example serveConfigOf({model: "m"}, {MAX_BATCH_ROWS: "32"}).maxBatchRows // 32 */
export const serveConfigOf = (values, env) => serveConfig(readOptions(SERVE_OPTIONS, values, env), env);

/** @example await gatewayConfigOf({model: "m.gguf"}, {PORT: "9001"}) */
export const gatewayConfigOf = async (values, env) => gatewayConfig(readOptions(GATEWAY_OPTIONS, values, env), env);
