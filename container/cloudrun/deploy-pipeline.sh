#!/usr/bin/env bash
# Deploys a pipeline of layer nodes to Cloud Run, one service per node, with the layer ranges
# `layerfold plan` balances (default: gemma-4-31B on 10 nodes). Run from anywhere; needs node,
# the repository (for the plan) and, unless DRY_RUN=1, an authenticated gcloud.
#
#   IMAGE=europe-west4-docker.pkg.dev/PROJECT/layerfold/node:TAG \
#   MODEL_URL=r2://models/gemma-4-31B-it-q4_0.gguf R2_ENDPOINT=https://ACCOUNT.r2.cloudflarestorage.com \
#   REGION=europe-west4 container/cloudrun/deploy-pipeline.sh
#
# The plan reads the model's header from PLAN_MODEL (default MODEL_URL; r2:// needs the R2_*
# credentials in the environment, or pass a local copy). DRY_RUN=1 writes the rendered services
# to OUT_DIR and deploys nothing (warning when an r2:// or s3:// model has no R2_ENDPOINT, which
# a real deployment refuses). docs/deployment.md walks through the whole deployment.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

: "${IMAGE:?set IMAGE to the pushed container image}"
: "${MODEL_URL:?set MODEL_URL to where the nodes load the GGUF from (r2://, s3://, https://)}"
NODES="${NODES:-10}"
PLAN_MODEL="${PLAN_MODEL:-$MODEL_URL}"
PREFIX="${PREFIX:-layerfold-node}"
MEMORY="${MEMORY:-6Gi}"
CPU="${CPU:-2}"
THREADS="${THREADS:-$CPU}"
R2_ENDPOINT="${R2_ENDPOINT:-}"
OUT_DIR="${OUT_DIR:-$(mktemp -d)}"
DRY_RUN="${DRY_RUN:-0}"
mkdir -p "$OUT_DIR"
if [ "$DRY_RUN" != 1 ]; then
  : "${REGION:?set REGION (e.g. europe-west4)}"
fi
# An r2:// or s3:// model is read through R2_ENDPOINT, the one endpoint the manifest passes on:
# nodes rendered without it could not load their weights.
case "$MODEL_URL" in
  r2://* | s3://*)
    if [ -z "$R2_ENDPOINT" ]; then
      if [ "$DRY_RUN" != 1 ]; then
        echo "deploy-pipeline: R2_ENDPOINT is empty: the nodes could not read $MODEL_URL (set it to https://ACCOUNT.r2.cloudflarestorage.com or the S3 endpoint)" >&2
        exit 1
      fi
      echo "deploy-pipeline: warning: R2_ENDPOINT is empty: the rendered services set R2_ENDPOINT: \"\", and deployed so, the nodes could not read $MODEL_URL" >&2
    fi
    ;;
esac

# "FIRST-LAST" per node, in pipeline order, from the plan's JSON.
plan_json="$(node "$repo/js-glue/bin/layerfold.js" plan "$PLAN_MODEL" --nodes "$NODES" --json)"
mapfile -t ranges < <(node -e 'for (const n of JSON.parse(process.argv[1]).nodes) console.log(n.layers[0] + "-" + n.layers[1])' "$plan_json")
if [ "${#ranges[@]}" -ne "$NODES" ]; then
  echo "deploy-pipeline: the plan has ${#ranges[@]} nodes, expected $NODES" >&2
  exit 1
fi

# Fills the ${...} placeholders of service.yaml; values must not contain '|'.
render() {  # service layers
  sed -e "s|\${SERVICE}|$1|g" -e "s|\${LAYERS}|$2|g" -e "s|\${IMAGE}|$IMAGE|g" -e "s|\${MODEL_URL}|$MODEL_URL|g" \
      -e "s|\${R2_ENDPOINT}|$R2_ENDPOINT|g" -e "s|\${MEMORY}|$MEMORY|g" -e "s|\${CPU}|$CPU|g" -e "s|\${THREADS}|$THREADS|g" \
      "$here/service.yaml"
}

urls=()
for i in "${!ranges[@]}"; do
  service="$PREFIX-$i"
  manifest="$OUT_DIR/$service.yaml"
  render "$service" "${ranges[$i]}" > "$manifest"
  echo "node $i: layers ${ranges[$i]} -> $manifest"
  if [ "$DRY_RUN" = 1 ]; then
    continue
  fi
  gcloud run services replace "$manifest" --region "$REGION" --quiet
  # The node checks its own bearer token (AUTH_TOKEN): Cloud Run's IAM check would claim the
  # same Authorization header, so the service admits everyone and the token guards /v1/*.
  gcloud run services add-iam-policy-binding "$service" --region "$REGION" --member allUsers --role roles/run.invoker --quiet >/dev/null
  urls+=("$(gcloud run services describe "$service" --region "$REGION" --format 'value(status.url)')")
done

if [ "$DRY_RUN" = 1 ]; then
  echo "dry run: rendered ${#ranges[@]} services in $OUT_DIR"
  exit 0
fi
nodes_spec="$(IFS=,; echo "${urls[*]}")"
echo "pipeline: --nodes $nodes_spec"
echo "check it: AUTH_TOKEN=... node js-glue/bin/layerfold.js validate --model $MODEL_URL --nodes $nodes_spec"
