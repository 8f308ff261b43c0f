package e2e

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// ociImage is an image of one layer holding one static binary at
// /<name>, as an OCI image-layout archive that `ctr images import` reads
// (https://github.com/opencontainers/image-spec/blob/main/image-layout.md):
// the real-node tests make their images from files on the machine, with
// no registry.
type ociImage struct {
	ref        string // the name containerd gives it, e.g. kubestore.test/workload:1
	binary     string // the file packed as /<base of binary>
	entrypoint []string
}

// writeArchive writes the image's archive to path.
func (im ociImage) writeArchive(path string) error {
	bin, err := os.ReadFile(im.binary)
	if err != nil {
		return err
	}
	// The image holds nothing else: a binary that needs a loader and a
	// libc exits at once, with nothing in its log.
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("%s: %w", im.binary, err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is linked dynamically (build it with CGO_ENABLED=0): an image of it alone cannot run", im.binary)
		}
	}
	// The layer: the binary and the directories a container's mounts
	// need. An uncompressed layer; its digest is its diff ID.
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	epoch := time.Unix(0, 0)
	for _, dir := range []string{"tmp/", "etc/"} {
		if err := lw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o1777, ModTime: epoch}); err != nil {
			return err
		}
	}
	if err := lw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: baseName(im.binary), Mode: 0o755, Size: int64(len(bin)), ModTime: epoch}); err != nil {
		return err
	}
	if _, err := lw.Write(bin); err != nil {
		return err
	}
	if err := lw.Close(); err != nil {
		return err
	}
	layerDigest := digestOf(layer.Bytes())
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH, "os": "linux",
		"config": map[string]any{"Entrypoint": im.entrypoint, "Env": []string{"PATH=/"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
	})
	if err != nil {
		return err
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digestOf(config), "size": len(config)},
		"layers": []any{map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layerDigest, "size": layer.Len()}},
	})
	if err != nil {
		return err
	}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
		"manifests": []any{map[string]any{
			"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digestOf(manifest), "size": len(manifest),
			"platform": map[string]string{"architecture": runtime.GOARCH, "os": "linux"},
			// containerd names the imported image after this annotation.
			"annotations": map[string]string{"io.containerd.image.name": im.ref, "org.opencontainers.image.ref.name": im.ref},
		}},
	})
	if err != nil {
		return err
	}
	var archive bytes.Buffer
	aw := tar.NewWriter(&archive)
	files := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{blobPath(layerDigest), layer.Bytes()},
		{blobPath(digestOf(config)), config},
		{blobPath(digestOf(manifest)), manifest},
	}
	for _, f := range files {
		if err := aw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: epoch}); err != nil {
			return err
		}
		if _, err := aw.Write(f.data); err != nil {
			return err
		}
	}
	if err := aw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, archive.Bytes(), 0o644)
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func blobPath(digest string) string { return fmt.Sprintf("blobs/sha256/%s", digest[len("sha256:"):]) }

func baseName(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '/' {
			return path[i+1:]
		}
	}
	return path
}

// An image of a dynamically linked binary is refused: alone in its image,
// it cannot start (the first real node's containers exited at once, with
// an empty log).
func TestOCIImageRefusesADynamicBinary(t *testing.T) {
	dir := t.TempDir()
	if err := (ociImage{ref: "kubestore.test/x:1", binary: workloadBinary.get(t)}).writeArchive(filepath.Join(dir, "static.tar")); err != nil {
		t.Errorf("a static binary: %v", err)
	}
	dynamic, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to try a dynamic binary with")
	}
	err = (ociImage{ref: "kubestore.test/x:1", binary: dynamic}).writeArchive(filepath.Join(dir, "dynamic.tar"))
	if err == nil || !strings.Contains(err.Error(), "linked dynamically") {
		t.Errorf("a dynamically linked binary: %v, want a refusal", err)
	}
}
