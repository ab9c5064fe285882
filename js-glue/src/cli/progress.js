// The CLI's load progress: one bar per node (or per download) on stderr (cli-progress), only on a
// terminal. Each bar measures its node's own bytes (LayerNode.open's onProgress), or a pull's
// whole file, so each ends at 100%, and the finished bars stay on screen.
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
    clearOnComplete: false,
  }, cliProgress.Presets.shades_classic);
  const perNode = new Map();
  return {
    onProgress(p, node) {
      let bar = perNode.get(node);
      if (!bar) perNode.set(node, (bar = bars.create(p.totalBytes, 0, { label: label(node), mb: '0', totalMb: (p.totalBytes / MB).toFixed(0), rate: '0' })));
      bar.setTotal(p.totalBytes);
      bar.update(p.bytes, { mb: (p.bytes / MB).toFixed(0), totalMb: (p.totalBytes / MB).toFixed(0), rate: (p.rate / MB).toFixed(1) });
    },
    // One last frame before stopping: a load faster than the bars' redraw timer still shows its end.
    stop: () => {
      if (perNode.size > 0) bars.update();
      bars.stop();
    },
  };
}
