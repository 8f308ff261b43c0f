package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The README's custom-resource walkthrough.
const devicesCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: devices.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: devices, singular: device, kind: Device, shortNames: [dev]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}
    additionalPrinterColumns:
    - {name: Model, type: string, jsonPath: .spec.model}
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [model]
            x-kubernetes-validations:
            - {rule: "self.replicas <= 10", message: "replicas must be at most 10"}
            properties:
              model: {type: string}
              replicas: {type: integer, minimum: 0, default: 1}
          status:
            type: object
            properties:
              replicas: {type: integer}
`

const gateway = `apiVersion: example.com/v1
kind: Device
metadata:
  name: gateway
spec:
  model: gw-100
`

func TestKubectlCustomResources(t *testing.T) {
	requireKubectl(t)
	dir := shortTempDir(t)
	p := start(t, dir)
	files := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(files, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}

	if out := p.mustKubectl("apply", "-f", write("crd.yaml", devicesCRD)); !strings.Contains(out, "devices.example.com created") {
		t.Fatalf("applying the CRD:\n%s", out)
	}
	applied := time.Now()
	for {
		asked := time.Now()
		out, err := p.kubectl("api-resources", "--api-group=example.com", "--no-headers")
		if err == nil && strings.Contains(out, "devices") {
			t.Logf("devices in discovery %s after kubectl apply returned", asked.Sub(applied).Round(time.Millisecond))
			if asked.Sub(applied) > time.Second {
				t.Errorf("devices appeared in discovery only %s after the CRD was applied", asked.Sub(applied))
			}
			break
		}
		if time.Since(applied) > 10*time.Second {
			t.Fatalf("devices not in kubectl api-resources within 10s: %v\n%s", err, out)
		}
	}

	// A watch started before the objects change sees them change.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	watchOut := &lockedWriter{w: &bytes.Buffer{}}
	watch := exec.CommandContext(ctx, "kubectl", "--kubeconfig", p.kubeconfig, "get", "devices", "-w", "--output-watch-events", "-o", "custom-columns=EVENT:.type,NAME:.object.metadata.name,MODEL:.object.spec.model")
	watch.Stdout, watch.Stderr = watchOut, watchOut
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		watch.Wait()
	}()

	device := write("gateway.yaml", gateway)
	if out := p.mustKubectl("create", "-f", device); !strings.Contains(out, "device.example.com/gateway created") {
		t.Errorf("create:\n%s", out)
	}
	out := p.mustKubectl("get", "devices")
	for _, w := range []string{"NAME", "MODEL", "REPLICAS", "gateway", "gw-100", "1"} {
		if !strings.Contains(out, w) {
			t.Errorf("kubectl get devices lacks %q (printer columns, defaulting):\n%s", w, out)
		}
	}
	if out := p.mustKubectl("get", "dev", "gateway", "-o", "jsonpath={.spec.model}"); out != "gw-100" {
		t.Errorf("get by short name: %q", out)
	}
	p.mustKubectl("patch", "device", "gateway", "--type=merge", "-p", `{"spec":{"model":"gw-200"}}`)
	// The patch took spec.model from kubectl create: applying it again
	// conflicts unless forced, as on a cluster.
	if out, err := p.kubectl("apply", "--server-side", "-f", device); err == nil || !strings.Contains(out, "conflict") {
		t.Errorf("server-side apply of a field another manager owns: %v\n%s", err, out)
	}
	if out := p.mustKubectl("apply", "--server-side", "--force-conflicts", "-f", device); !strings.Contains(out, "serverside-applied") {
		t.Errorf("server-side apply:\n%s", out)
	}
	if out := p.mustKubectl("scale", "device", "gateway", "--replicas=3"); !strings.Contains(out, "scaled") {
		t.Errorf("scale:\n%s", out)
	}
	if out := p.mustKubectl("get", "device", "gateway", "-o", "jsonpath={.spec.replicas}"); out != "3" {
		t.Errorf("replicas after kubectl scale: %q", out)
	}
	out, err := p.kubectl("scale", "device", "gateway", "--replicas=30")
	if err == nil || !strings.Contains(out, "replicas must be at most 10") {
		t.Errorf("scaling beyond the CEL rule: %v\n%s", err, out)
	}
	out, err = p.kubectl("create", "-f", write("bad.yaml", strings.Replace(gateway, "model: gw-100", "model: 7", 1)))
	if err == nil || !strings.Contains(out, "spec.model") || !strings.Contains(out, "must be of type string") {
		t.Errorf("creating an object against the schema: %v\n%s", err, out)
	}

	if out := p.mustKubectl("explain", "devices.spec.replicas"); !strings.Contains(out, "replicas") || !strings.Contains(out, "integer") {
		t.Errorf("kubectl explain of a custom resource:\n%s", out)
	}
	spare := write("spare.yaml", strings.Replace(gateway, "name: gateway", "name: spare", 1))
	if out := p.mustKubectl("apply", "-f", spare); !strings.Contains(out, "device.example.com/spare created") {
		t.Errorf("client-side apply:\n%s", out)
	}
	if out := p.mustKubectl("apply", "-f", spare); !strings.Contains(out, "device.example.com/spare unchanged") {
		t.Errorf("second client-side apply must change nothing:\n%s", out)
	}
	if out := p.mustKubectl("delete", "device", "spare"); !strings.Contains(out, `device.example.com "spare" deleted`) {
		t.Errorf("delete:\n%s", out)
	}

	if !eventually(10*time.Second, func() bool {
		got := watchOut.String()
		return hasRow(got, "ADDED", "gateway", "gw-100") && hasRow(got, "MODIFIED", "gateway", "gw-200") && hasRow(got, "DELETED", "spare", "gw-100")
	}) {
		t.Errorf("kubectl get devices -w did not show the creates, the patch and the delete:\n%s", watchOut.String())
	}

	// CRDs and objects survive a restart.
	cancel()
	watch.Wait()
	if err := p.stop(30 * time.Second); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	p = start(t, dir)
	if out := p.mustKubectl("get", "device", "gateway", "-o", "jsonpath={.spec.model}"); out != "gw-100" {
		t.Errorf("device after a restart: model %q", out)
	}

	// Deleting the CRD deletes its objects.
	p.mustKubectl("delete", "crd", "devices.example.com", "--timeout=60s")
	p.mustKubectl("apply", "-f", write("crd.yaml", devicesCRD))
	p.mustKubectl("wait", "--for=condition=established", "crd/devices.example.com", "--timeout=30s")
	if out := p.mustKubectl("get", "devices", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Errorf("objects of a deleted CRD came back with it:\n%s", out)
	}
}

// hasRow reports whether a line of kubectl's table output has exactly
// these cells.
func hasRow(table string, cells ...string) bool {
	for _, line := range strings.Split(table, "\n") {
		if slices.Equal(strings.Fields(line), cells) {
			return true
		}
	}
	return false
}

// A firmware image can ship a CRD and its objects together in
// --manifests-dir: the objects are applied once the CRD is served.
func TestManifestsDirCustomResources(t *testing.T) {
	requireKubectl(t)
	mdir := filepath.Join(t.TempDir(), "manifests")
	if err := os.Mkdir(mdir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"00-crd.yaml": devicesCRD, "10-gateway.yaml": gateway} {
		if err := os.WriteFile(filepath.Join(mdir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p := start(t, shortTempDir(t), "--manifests-dir", mdir)
	var out string
	var err error
	if !eventually(30*time.Second, func() bool {
		out, err = p.kubectl("get", "device", "gateway", "-o", "jsonpath={.spec.model}/{.spec.replicas}")
		return err == nil && out == "gw-100/1"
	}) {
		t.Fatalf("the device of the manifests was not applied within 30s: %v %s\n%s", err, out, p.logs())
	}
}
