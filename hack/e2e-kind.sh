#!/usr/bin/env bash
# End-to-end run on kind with the real agent-sandbox controller, for machines
# with a Docker engine and network access (make test runs the same
# controller, built from its module, on the kwokctl test bed everywhere else):
#   1. create a kind cluster (kind itself comes from the Go module proxy);
#   2. build the operator image and load it into the cluster;
#   3. install agent-sandbox's published release manifests (v1.0.3, the
#      reference; its controller must be given only flags v1.0 accepts: the
#      webhook flags of v0.5.x stop it from starting);
#   4. install the operator (make deploy) with that image;
#   5. apply the samples with a freshly generated session-plane certificate
#      and wait for the sample task to reach Running with an endpoint.
# The cluster is deleted at the end unless KEEP_CLUSTER=1.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"

if ! command -v docker >/dev/null 2>&1 || ! docker info >/dev/null 2>&1; then
  echo "make e2e-kind needs a running Docker engine; none is reachable here (docker info failed)." >&2
  echo "The same scenarios run on the kwokctl test bed with: make test" >&2
  exit 1
fi
for tool in kubectl openssl curl; do
  command -v "${tool}" >/dev/null || { echo "make e2e-kind needs ${tool} on PATH" >&2; exit 1; }
done

KIND_VERSION=${KIND_VERSION:-v0.33.0}
AGENT_SANDBOX_VERSION=${AGENT_SANDBOX_VERSION:-v1.0.3}
AGENT_SANDBOX_MANIFEST=${AGENT_SANDBOX_MANIFEST:-https://github.com/kubernetes-sigs/agent-sandbox/releases/download/${AGENT_SANDBOX_VERSION}/manifest.yaml}
CLUSTER=${CLUSTER:-caliban-e2e}
IMAGE=${IMAGE:-caliban-operator:e2e}
kind() { go run "sigs.k8s.io/kind@${KIND_VERSION}" "$@"; }

workdir=$(mktemp -d)
export KUBECONFIG="${workdir}/kubeconfig"
cleanup() {
  if [[ "${KEEP_CLUSTER:-}" != 1 ]]; then kind delete cluster --name "${CLUSTER}" || true; fi
  rm -rf "${workdir}"
}
trap cleanup EXIT

kind create cluster --name "${CLUSTER}" --kubeconfig "${KUBECONFIG}" --wait 120s
make image IMAGE="${IMAGE}"
kind load docker-image "${IMAGE}" --name "${CLUSTER}"

curl -fsSL -o "${workdir}/agent-sandbox.yaml" "${AGENT_SANDBOX_MANIFEST}"
# v1.0 removed the conversion webhook and its flags; a manifest that still
# passes one would leave the controller crash-looping, so say so up front.
if grep -nE -- '--(enable-webhook|webhook-[a-z-]+|manage-webhook-certs)' "${workdir}/agent-sandbox.yaml"; then
  echo "${AGENT_SANDBOX_MANIFEST} passes webhook flags, which agent-sandbox v1.0 refuses" >&2
  exit 1
fi
kubectl apply --server-side -f "${workdir}/agent-sandbox.yaml"
kubectl wait --for condition=Established --timeout 120s crd/sandboxes.agents.x-k8s.io
kubectl -n agent-sandbox-system wait --for condition=Available --timeout 180s deployment --all

make deploy
kubectl -n caliban-system set image deployment/caliban-operator operator="${IMAGE}"
kubectl -n caliban-system rollout status deployment/caliban-operator --timeout 180s

# Samples, with a real certificate whose SAN is caliband's server name.
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=caliband" \
  -addext "subjectAltName=DNS:caliband" -keyout "${workdir}/tls.key" -out "${workdir}/tls.crt" 2>/dev/null
kubectl create secret generic caliban-session-plane-tls \
  --from-file=tls.crt="${workdir}/tls.crt" --from-file=tls.key="${workdir}/tls.key" --from-file=ca.crt="${workdir}/tls.crt"
kubectl create secret generic caliban-session-plane-token --from-literal=token="$(openssl rand -hex 16)"
kubectl apply -f manifests/samples/01-provider-credentials.yaml
kubectl apply -f manifests/samples/02-workspace.yaml
kubectl apply -f manifests/samples/03-calibantask.yaml
kubectl wait --for jsonpath='{.status.phase}'=Ready --timeout 60s workspace/demo
kubectl wait --for jsonpath='{.status.phase}'=Running --timeout 300s calibantask/demo-task
kubectl get calibantask demo-task -o jsonpath='{.status.calibandEndpoint}{"\n"}'
echo "e2e-kind: the sample task is Running on kind with agent-sandbox ${AGENT_SANDBOX_VERSION}"
