// Package manifests applies the YAML and JSON manifests of a directory to
// the server by server-side apply, once it is ready and again whenever a
// file changes, so a firmware image can ship its bootstrap objects.
//
// Applying is idempotent: an unchanged object is not written again. A file
// that fails (bad YAML, a kind the server does not serve yet, a refused
// object) is logged and retried at the next poll; the server keeps
// serving. Objects of a removed file or document are left in place.
package manifests

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

// FieldManager owns the fields the manifests set.
const FieldManager = "kubestore-manifests"

// PollInterval is how often the directory is scanned for changes.
const PollInterval = 3 * time.Second

// Applier applies the manifests of one directory.
type Applier struct {
	dir    string
	client dynamic.Interface
	disco  discovery.CachedDiscoveryInterface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	// applied is the content hash of each file last applied without error.
	applied map[string][sha256.Size]byte
	// lastErr is the last error logged per file, so a file that keeps
	// failing the same way is logged once.
	lastErr map[string]string
}

// New returns an Applier of dir that talks to the server of kubeconfig.
func New(dir, kubeconfig string) (*Applier, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("manifests: reading %s: %w", kubeconfig, err)
	}
	return newApplier(dir, rc)
}

func newApplier(dir string, rc *rest.Config) (*Applier, error) {
	rc = rest.CopyConfig(rc)
	rc.UserAgent = FieldManager
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, err
	}
	client, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	disco := memory.NewMemCacheClient(dc)
	return &Applier{
		dir:     dir,
		client:  client,
		disco:   disco,
		mapper:  restmapper.NewDeferredDiscoveryRESTMapper(disco),
		applied: map[string][sha256.Size]byte{},
		lastErr: map[string]string{},
	}, nil
}

// Run waits until the server is ready, then applies the directory every
// PollInterval until ctx is done; a failing apply is retried at the next
// poll.
func (a *Applier) Run(ctx context.Context) {
	for !a.ready(ctx) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
	t := time.NewTicker(PollInterval)
	defer t.Stop()
	for {
		a.Sync(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ready reports whether the server's /readyz answers ok.
func (a *Applier) ready(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return a.disco.RESTClient().Get().AbsPath("/readyz").Do(ctx).Error() == nil
}

// Sync applies every file that changed since it was last applied without
// error, in lexical order, and reports how many files it applied.
func (a *Applier) Sync(ctx context.Context) (applied int) {
	files, err := a.files()
	if err != nil {
		a.report("", err)
		return 0
	}
	a.report("", nil)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			a.report(f, err)
			continue
		}
		sum := sha256.Sum256(data)
		if old, ok := a.applied[f]; ok && old == sum {
			continue
		}
		n, err := a.applyFile(ctx, f, data)
		if ctx.Err() != nil {
			return applied
		}
		a.report(f, err)
		if err != nil {
			continue
		}
		a.applied[f] = sum
		applied++
		klog.InfoS("Applied manifests", "file", f, "objects", n)
	}
	return applied
}

// report logs err for file when it differs from the last one logged.
func (a *Applier) report(file string, err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if a.lastErr[file] == msg {
		return
	}
	a.lastErr[file] = msg
	if err != nil {
		klog.ErrorS(err, "Applying manifests; retrying every poll", "dir", a.dir, "file", file)
	}
}

// files lists the manifests: *.yaml, *.yml and *.json directly in the
// directory, hidden files (editors' temporaries) excluded.
func (a *Applier) files() ([]string, error) {
	entries, err := os.ReadDir(a.dir)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") {
			continue
		}
		switch strings.ToLower(filepath.Ext(name)) {
		case ".yaml", ".yml", ".json":
			files = append(files, filepath.Join(a.dir, name))
		}
	}
	sort.Strings(files)
	return files, nil
}

// applyFile applies every object of a file; it goes on after a failing
// object and returns the errors of all.
func (a *Applier) applyFile(ctx context.Context, file string, data []byte) (int, error) {
	objs, err := decode(data)
	if err != nil {
		return 0, err
	}
	var errs []error
	n := 0
	for _, obj := range objs {
		if err := a.apply(ctx, obj); err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", obj.GetKind(), name(obj), err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

func name(obj *unstructured.Unstructured) string {
	if ns := obj.GetNamespace(); ns != "" {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}

// decode splits a YAML (multi-document) or JSON file into objects; a List
// contributes its items.
func decode(data []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for i := 1; ; i++ {
		var raw map[string]any
		if err := d.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(raw) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{Object: raw}
		if obj.IsList() {
			list, err := obj.ToList()
			if err != nil {
				return nil, fmt.Errorf("document %d: %w", i, err)
			}
			for j := range list.Items {
				item := &list.Items[j]
				if item.GetAPIVersion() == "" || item.GetKind() == "" || item.GetName() == "" {
					return nil, fmt.Errorf("document %d: item %d: apiVersion, kind and metadata.name are required", i, j+1)
				}
				objs = append(objs, item)
			}
			continue
		}
		if obj.GetAPIVersion() == "" || obj.GetKind() == "" || obj.GetName() == "" {
			return nil, fmt.Errorf("document %d: apiVersion, kind and metadata.name are required", i)
		}
		objs = append(objs, obj)
	}
}

// apply server-side applies one object, forcing ownership of its fields.
func (a *Applier) apply(ctx context.Context, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		// A kind served since the last discovery, e.g. a custom resource
		// whose definition an earlier manifest created.
		a.mapper.Reset()
		mapping, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = a.client.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := obj.GetNamespace()
		if ns == "" {
			ns = metav1.NamespaceDefault
			obj.SetNamespace(ns)
		}
		ri = a.client.Resource(mapping.Resource).Namespace(ns)
	}
	data, err := runtime.Encode(unstructured.UnstructuredJSONScheme, obj)
	if err != nil {
		return err
	}
	force := true
	_, err = ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: FieldManager, Force: &force})
	return err
}
