// Pipeline.open: a pipeline from a model and a --nodes spec in Node, its local nodes loaded in
// this process (the class itself, its steps and replay, is pipeline_core.js).
import { LayerNode } from '../node/layer_node.js';
import { MemberGroup } from '../group/member_group.js';
import { readModelTokenizer } from '../gguf/model_header.js';
import { GroupNode } from './group_node.js';
import { parseNodesSpec } from './nodes_spec.js';
import { checkNodes, PipelineCore } from './pipeline_core.js';
import { RemoteNode } from './remote_node.js';

export class Pipeline extends PipelineCore {
  /**
   * @param {{model: string, nodes?: string, threads?: number, build?: string, cacheDir?: string,
   *          onProgress?: (progress: object, node: number) => void, authToken?: string,
   *          nodeTimeoutMs?: number, nodeReadyTimeoutMs?: number, maxSessions?: number,
   *          perLayerTable?: 'rows'|'whole', perLayerRowCacheBytes?: number, allowUnvalidatedSource?: boolean,
   *          approx?: {truncatedAttention?: boolean, truncationThreshold?: number, earlyExit?: boolean,
   *                    exitThreshold?: number, exitWindow?: number, ffnTopK?: number,
   *                    ffnTopKLayers?: Object<string, number>, ffnTopKThreshold?: number}}} options
   *   model: the GGUF (its header, read once here, gives the tokenizer and the layer count and
   *   is handed to the local nodes, which load their tensors from the file); nodes: "local:0-29,http://10.0.0.7:8080" (default one local node
   *   with every layer); authToken: bearer token for remote nodes; nodeTimeoutMs /
   *   nodeReadyTimeoutMs: how long a remote node may take to answer / to be ready again before
   *   a retry (RemoteNode.open); maxSessions: per local node; perLayerTable,
   *   perLayerRowCacheBytes: how the local first node reads per_layer_token_embd (LayerNode.open);
   *   maxSpan: the longest media span (stepMedia) the local nodes take (LayerNode.open);
   *   allowUnvalidatedSource: read a model from a server without ETag or Last-Modified (openSource); approx: approximate modes for
   *   every forward of every node (docs/approximate.md; default off), replays included, so a
   *   rebuilt cache is the one the node had; with earlyExit the last row's exit state travels
   *   from node to node. draftModel: Gemma 4's MTP drafter of the model, loaded beside the head
   *   by the last node, which must be local (a remote one is given its own: serve --draft-model).
   *   A tensor-parallel group (tp(...) in nodes) may go anywhere: at the pipeline's start it
   *   holds the embedding, at its end the head (local members are opened so; member servers
   *   are started with --ends); memberDeadlineMs: how long its remote members may take over one
   *   phase of a call (default nodeTimeoutMs's, else 30 s).
   * @example const p = await Pipeline.open({ model, nodes: 'local:0-0,http://127.0.0.1:8080' });
   */
  static async open({ model, nodes: spec, threads, build, cacheTypeK, cacheTypeV, maxSpan, cacheDir, onProgress, authToken, nodeTimeoutMs, nodeReadyTimeoutMs, maxSessions,
    perLayerTable, perLayerRowCacheBytes, allowUnvalidatedSource, approx = {}, draftModel, memberDeadlineMs = nodeTimeoutMs }) {
    const { header, tokenizer } = await readModelTokenizer(model, { cacheDir, allowUnvalidatedSource });
    const entries = parseNodesSpec(spec ?? `local:0-${header.info.n_layer - 1}`);
    const refusal = entriesRefusal(entries, draftModel);
    if (refusal) {
      tokenizer.close();
      throw new Error(refusal);
    }
    const opened = [];
    try {
      for (const [i, entry] of entries.entries()) {
        if (entry.kind === 'group') {
          const atEnd = i === 0 || i === entries.length - 1;
          const group = entry.urls
            ? await MemberGroup.connect(entry.urls, { authToken, deadlineMs: memberDeadlineMs })
            : await MemberGroup.open({ model, layers: [entry.begin, entry.end], members: entry.members, build, threads, cacheDir, cacheTypeK, cacheTypeV, ends: atEnd });
          const name = entry.urls ? `tp(${entry.urls.join(',')})` : `tp(local*${entry.members})`;
          opened.push(new GroupNode(group, name));
          const lacks = (i === 0 && !group.holdsEmbedding && 'the embedding') || (i === entries.length - 1 && !group.holdsHead && 'the head');
          if (lacks) throw new Error(`${name} is at the pipeline's ${i === 0 ? 'start' : 'end'} but its members hold no part of ${lacks}: start them with serve --ends`);
          continue;
        }
        opened.push(entry.kind === 'remote'
          ? await RemoteNode.open(entry.url, { authToken, timeoutMs: nodeTimeoutMs, readyTimeoutMs: nodeReadyTimeoutMs })
          : await LayerNode.open({
            // The header read above: the node parses its bytes instead of reading them again.
            model, header, layers: [entry.begin, entry.end], threads, build, cacheTypeK, cacheTypeV, maxSpan, cacheDir, maxSessions, perLayerTable, perLayerRowCacheBytes, allowUnvalidatedSource,
            ...(draftModel !== undefined && i === entries.length - 1 ? { draftModel } : {}),
            // The top-K FFN reads only the kept features' columns of a feature-major ffn_down.
            ffnDownLayout: approx.ffnTopK > 0 || approx.ffnTopKLayers ? 'features' : 'units',
            onProgress: onProgress && ((progress) => onProgress(progress, i)),
          }));
      }
      checkNodes(opened, header.info);
    } catch (error) {
      for (const node of opened) node.close();
      tokenizer.close();
      throw error;
    }
    return new Pipeline(opened, header, tokenizer, approx);
  }
}

// What --nodes asks that no pipeline can do, said before anything opens: a draft model for a
// last node that is remote or a group.
function entriesRefusal(entries, draftModel) {
  if (draftModel !== undefined && entries.at(-1).kind === 'remote') {
    return `a draft model is loaded by the node holding the head, here the remote ${entries.at(-1).url}: start it with serve --draft-model`;
  }
  if (draftModel !== undefined && entries.at(-1).kind === 'group') {
    return 'a draft model is loaded by a plain node holding the head, not by a tensor-parallel group: end the pipeline with a plain node';
  }
  return null;
}
