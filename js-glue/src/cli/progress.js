// The CLI's load progress: one bar per node (or per download) on stderr (cli-progress), only on a terminal.
import cliProgress from 'cli-progress';

const MB = 2 ** 20;

/**
 * Returns {onProgress(progress, node), stop()}; a no-op off a terminal or with quiet. label(node):
 * the text before each bar.
 */
export function loadProgress({ quiet = false, label = (node) => `node ${node}` } = {}) {
  if (quiet || !process.stderr.isTTY) return { onProgress: undefined, stop: () => {} };
  const bars = new cliProgress.MultiBar({
    stream: process.stderr,
    format: '{label} |{bar}| {percentage}% {mb}/{totalMb} MiB {rate} MiB/s eta {eta_formatted}',
    hideCursor: true,
    clearOnComplete: true,
  }, cliProgress.Presets.shades_classic);
  const perNode = new Map();
  return {
    onProgress(p, node) {
      let bar = perNode.get(node);
      if (!bar) perNode.set(node, (bar = bars.create(p.totalBytes, 0, { label: label(node), mb: '0', totalMb: (p.totalBytes / MB).toFixed(0), rate: '0' })));
      bar.setTotal(p.totalBytes);
      bar.update(p.bytes, { mb: (p.bytes / MB).toFixed(0), totalMb: (p.totalBytes / MB).toFixed(0), rate: (p.rate / MB).toFixed(1) });
    },
    // One last frame before clearing: a load faster than the bars' redraw timer still shows.
    stop: () => {
      if (perNode.size > 0) bars.update();
      bars.stop();
    },
  };
}
