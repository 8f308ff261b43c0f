#!/bin/sh
# kubelet-identity.sh NODE [ADMIN_KUBECONFIG] [DIR]
#
# The kubelet's own identity on a gateway (README, "Run it on a node of a
# cluster"): a key made here, a CSR for system:node:NODE to kubestore's
# kubelet-client signer, approved with the gateway's admin kubeconfig,
# and a kubeconfig for the kubelet with the certificate issued, written in
# DIR (default /var/lib/kubelet/pki). Prints the kubeconfig's path.
# make release-check's real node gets its identity from this script.
set -eu
node=$1
admin=${2:-/var/lib/kubestore/admin.kubeconfig}
dir=${3:-/var/lib/kubelet/pki}
k() { kubectl --kubeconfig "$admin" "$@"; }

mkdir -p "$dir"
openssl ecparam -name prime256v1 -genkey -noout -out "$dir/kubelet-client.key"
openssl req -new -key "$dir/kubelet-client.key" -subj "/O=system:nodes/CN=system:node:$node" -out "$dir/kubelet-client.csr"
name="kubelet-$node-$(date +%s)"
k create -f - >/dev/null <<EOF
apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata: {name: $name}
spec:
  request: $(base64 -w0 <"$dir/kubelet-client.csr")
  signerName: kubernetes.io/kube-apiserver-client-kubelet
  usages: [digital signature, client auth]
EOF
k certificate approve "$name" >/dev/null
cert=
for _ in $(seq 30); do
  cert=$(k get csr "$name" -o jsonpath='{.status.certificate}')
  [ -n "$cert" ] && break
  sleep 1
done
[ -n "$cert" ] || { echo "kubelet-identity.sh: the CSR $name was not issued in 30 s" >&2; exit 1; }
echo "$cert" | base64 -d >"$dir/kubelet-client.crt"
k config view --raw -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' | base64 -d >"$dir/kubestore-ca.crt"
kc="$dir/kubelet.kubeconfig"
kubectl --kubeconfig "$kc" config set-cluster kubestore --embed-certs --certificate-authority "$dir/kubestore-ca.crt" \
  --server "$(k config view --raw -o jsonpath='{.clusters[0].cluster.server}')" >/dev/null
kubectl --kubeconfig "$kc" config set-credentials "system:node:$node" --embed-certs \
  --client-certificate "$dir/kubelet-client.crt" --client-key "$dir/kubelet-client.key" >/dev/null
kubectl --kubeconfig "$kc" config set-context default --cluster kubestore --user "system:node:$node" >/dev/null
kubectl --kubeconfig "$kc" config use-context default >/dev/null
echo "$kc"
