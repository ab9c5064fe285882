// Wrong on purpose: the types test requires tsc to reject this file.
import { LayerNode } from 'layerfold';

export async function misuse(node: LayerNode): Promise<void> {
  await node.forward({ session: 1, startPos: '0', hidden: [1, 2, 3] });
}
