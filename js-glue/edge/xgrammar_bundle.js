// XGrammar (@mlc-ai/web-xgrammar, the grammar engine of response_format: src/tokens/grammar/)
// made fit for a Workers-style isolate at bundle time. The package is one Emscripten script with
// its WebAssembly inlined as base64, compiled from those bytes when first used; an isolate may
// not compile WebAssembly at run time, only import modules it was deployed with. So the bytes
// are written out as xgrammar.wasm beside the bundle (imported as a compiled module), and the
// script is bundled with a few edits, each checked to apply: the inline bytes dropped, the
// module instantiated from the imported one, the script's own URL (which it reads through
// Node's `url` module outside a browser) given as a constant, and its Node-only import cut.
import { readFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(import.meta.url);
const DATA_URI = /wasmBinaryFile="data:application\/octet-stream;base64,([A-Za-z0-9+/=]+)"/;

/** The file the engine's module is written to beside the bundle. */
export const XGRAMMAR_WASM = 'xgrammar.wasm';

function replaceOnce(source, from, to) {
  const parts = source.split(from);
  if (parts.length !== 2) throw new Error(`@mlc-ai/web-xgrammar: expected "${String(from).slice(0, 60)}" once in its script, found it ${parts.length - 1} times (a new version?)`);
  return parts.join(to);
}

/**
 * An esbuild plugin that bundles @mlc-ai/web-xgrammar for an isolate and writes its module to
 * outDir/xgrammar.wasm; the bundle imports it as "./xgrammar.wasm", which the wasm rule of the
 * runtime (wrangler's CompiledWasm, miniflare's modulesRules) turns into a WebAssembly.Module.
 * @example await build({ ..., plugins: [xgrammarForIsolates(outDir)] });
 */
export function xgrammarForIsolates(outDir) {
  const file = require.resolve('@mlc-ai/web-xgrammar');
  return {
    name: 'xgrammar-for-isolates',
    setup(b) {
      b.onResolve({ filter: /^\.\/xgrammar\.wasm$/ }, () => ({ path: `./${XGRAMMAR_WASM}`, external: true }));
      b.onLoad({ filter: /.*/ }, async (args) => {
        if (path.resolve(args.path) !== file) return undefined;
        let source = await readFile(file, 'utf8');
        const inline = DATA_URI.exec(source);
        if (!inline) throw new Error('@mlc-ai/web-xgrammar: no inline WebAssembly found in its script (a new version?)');
        await writeFile(path.join(outDir, XGRAMMAR_WASM), Buffer.from(inline[1], 'base64'));
        source = replaceOnce(source, inline[0], 'wasmBinaryFile=""');
        source = replaceOnce(source, 'binding = await Module()',
          'binding = await Module({ instantiateWasm: (imports, receive) => { WebAssembly.instantiate(xgrammarModule, imports).then((instance) => receive(instance, xgrammarModule)); return {}; } })');
        source = source.replaceAll("require('u' + 'rl').pathToFileURL(__filename).href", '"file:///xgrammar.js"');
        // Node's branch (an isolate has no `process`), whose import of Node's `module` a runtime
        // without Node built-ins refuses to load at all.
        source = replaceOnce(source, "await import('module')", 'await Promise.reject(new Error("Node built-ins are not available here"))');
        // The UMD script fills `exports` when it sees CommonJS's two names.
        return {
          contents: `import xgrammarModule from './${XGRAMMAR_WASM}';\nconst exports = {};\nconst module = { exports };\n${source}\nexport default exports;\n`,
          loader: 'js',
        };
      });
    },
  };
}
