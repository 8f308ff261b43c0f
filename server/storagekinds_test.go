package server_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// warnings collects the warnings the server sends.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.msgs
	w.msgs = nil
	return m
}

// What a kubelet does with the storage and node kinds, over protobuf as
// a kubelet speaks: register its node's CSINode and update its drivers,
// and list and watch CSIDrivers, RuntimeClasses and StorageClasses
// through informers; and what a CSI attacher does with a
// VolumeAttachment's status. Then where they are stored, what discovery
// and kubectl get show of them, and the warnings upstream gives.
func TestKubeletStorageAndNodeKinds(t *testing.T) {
	ts := startServer(t, testConfig(t))
	ctx := t.Context()
	cfg := rest.CopyConfig(ts.rest)
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	warned := &warnings{}
	cfg.WarningHandler = warned
	kubelet := kubernetes.NewForConfigOrDie(cfg)

	node, err := kubelet.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "edge-1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	factory := informers.NewSharedInformerFactory(kubelet, 0)
	drivers := factory.Storage().V1().CSIDrivers().Lister()
	classes := factory.Storage().V1().StorageClasses().Lister()
	runtimes := factory.Node().V1().RuntimeClasses().Lister()
	// The informers stop before the test's context ends: Shutdown waits
	// for them.
	informersCtx, stopInformers := context.WithCancel(ctx)
	factory.Start(informersCtx.Done())
	defer factory.Shutdown()
	defer stopInformers()
	for typ, synced := range factory.WaitForCacheSync(informersCtx.Done()) {
		if !synced {
			t.Fatalf("informer of %v did not sync", typ)
		}
	}

	t.Run("csinode registration", func(t *testing.T) {
		// As the kubelet's nodeinfomanager: a CSINode owned by the node,
		// without drivers, then each driver added as it registers.
		csiNodes := kubelet.StorageV1().CSINodes()
		created, err := csiNodes.Create(ctx, &storagev1.CSINode{
			ObjectMeta: metav1.ObjectMeta{Name: node.Name, OwnerReferences: []metav1.OwnerReference{
				{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}},
			Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Spec.Drivers = append(created.Spec.Drivers, storagev1.CSINodeDriver{Name: "csi.example.com", NodeID: "edge-1",
			TopologyKeys: []string{"topology.example.com/zone"}, Allocatable: &storagev1.VolumeNodeResources{Count: new(int32(16))}})
		updated, err := csiNodes.Update(ctx, created, metav1.UpdateOptions{})
		if err != nil || len(updated.Spec.Drivers) != 1 {
			t.Fatalf("adding a driver: %v %+v", err, updated)
		}
		// The allocatable count may change (MutableCSINodeAllocatableCount).
		updated.Spec.Drivers[0].Allocatable.Count = new(int32(8))
		if updated, err = csiNodes.Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("changing the count: %v", err)
		}

		moved := updated.DeepCopy()
		moved.Spec.Drivers[0].NodeID = "elsewhere"
		_, err = csiNodes.Update(ctx, moved, metav1.UpdateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.drivers: Invalid value") || !strings.Contains(err.Error(), "field is immutable") {
			t.Errorf("changing a driver's node ID: %v, want 422 naming spec.drivers", err)
		}

		unconditional := updated.DeepCopy()
		unconditional.ResourceVersion = ""
		unconditional.Labels = map[string]string{"a": "b"}
		_, err = csiNodes.Update(ctx, unconditional, metav1.UpdateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.resourceVersion: Invalid value: 0: must be specified for an update") {
			t.Errorf("update without resourceVersion: %v, want upstream's 422", err)
		}

		// CSIVolumeHealth is off: a status update cannot add storage health
		// (it is dropped before validation, as upstream).
		withHealth := updated.DeepCopy()
		withHealth.Status.StorageHealth = []storagev1.StorageHealth{{Name: "csi.example.com",
			HealthConditions: []storagev1.StorageHealthCondition{{Status: storagev1.StorageDegraded, Reason: "Slow"}}}}
		afterStatus, err := csiNodes.UpdateStatus(ctx, withHealth, metav1.UpdateOptions{})
		if err != nil || len(afterStatus.Status.StorageHealth) != 0 {
			t.Errorf("status update: %v, storage health %v", err, afterStatus.Status.StorageHealth)
		}
	})

	t.Run("informers", func(t *testing.T) {
		if _, err := kubelet.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "csi.example.com"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := kubelet.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local"},
			Provisioner: "csi.example.com"}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := kubelet.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc"}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "the informers see the new objects", func() (bool, error) {
			d, err := drivers.Get("csi.example.com")
			if err != nil {
				return false, err
			}
			sc, err := classes.Get("local")
			if err != nil {
				return false, err
			}
			rc, err := runtimes.Get("gvisor")
			if err != nil {
				return false, err
			}
			// Defaulted as kube-apiserver does.
			return *d.Spec.AttachRequired && !*d.Spec.PodInfoOnMount && *d.Spec.FSGroupPolicy == storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy &&
				*sc.VolumeBindingMode == storagev1.VolumeBindingImmediate && *sc.ReclaimPolicy == corev1.PersistentVolumeReclaimDelete &&
				rc.Handler == "runsc", nil
		})
		if err := kubelet.NodeV1().RuntimeClasses().Delete(ctx, "gvisor", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "the informer sees the deletion", func() (bool, error) {
			l, err := runtimes.List(labels.Everything())
			return err == nil && len(l) == 0, err
		})
	})

	t.Run("volumeattachment status", func(t *testing.T) {
		vas := kubelet.StorageV1().VolumeAttachments()
		va, err := vas.Create(ctx, &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "va-1"},
			Spec: storagev1.VolumeAttachmentSpec{Attacher: "csi.example.com", NodeName: node.Name,
				Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: new("pv-1")}},
			Status: storagev1.VolumeAttachmentStatus{Attached: true}}, metav1.CreateOptions{})
		if err != nil || va.Status.Attached {
			t.Fatalf("create: %v, status %+v (create drops status)", err, va.Status)
		}
		attached := va.DeepCopy()
		attached.Status = storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: map[string]string{"devicePath": "/dev/vdb"}}
		attached.Spec.NodeName = "other"
		attached.Labels = map[string]string{"by": "status"}
		got, err := vas.UpdateStatus(ctx, attached, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !got.Status.Attached || got.Status.AttachmentMetadata["devicePath"] != "/dev/vdb" || got.Spec.NodeName != node.Name || got.Labels != nil {
			t.Errorf("status update: status %+v, node %q, labels %v", got.Status, got.Spec.NodeName, got.Labels)
		}
		respec := got.DeepCopy()
		respec.Spec.NodeName = "other"
		if _, err := vas.Update(ctx, respec, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec: Invalid value") {
			t.Errorf("changing the spec: %v, want 422 (immutable)", err)
		}
	})

	t.Run("stored in etcd as protobuf under kube-apiserver's keys", func(t *testing.T) {
		for _, key := range []string{"/registry/csinodes/edge-1", "/registry/csidrivers/csi.example.com", "/registry/storageclasses/local",
			"/registry/volumeattachments/va-1"} {
			resp, err := ts.backend.Client().Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Kvs) != 1 {
				t.Errorf("%s: not in etcd", key)
				continue
			}
			if v := resp.Kvs[0].Value; !strings.HasPrefix(string(v), "k8s\x00") {
				t.Errorf("%s is not stored as protobuf: %q", key, v[:min(len(v), 16)])
			}
		}
		if _, err := kubelet.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "runc"}, Handler: "runc"}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if resp, err := ts.backend.Client().Get(ctx, "/registry/runtimeclasses/runc"); err != nil || len(resp.Kvs) != 1 {
			t.Errorf("/registry/runtimeclasses/runc: %v, %v", err, resp)
		}
	})

	t.Run("discovery", func(t *testing.T) {
		for gv, want := range map[string]map[string][]string{
			"storage.k8s.io/v1": {"storageclasses": {"sc"}, "volumeattachments": nil, "volumeattachments/status": nil,
				"csinodes": nil, "csinodes/status": nil, "csidrivers": nil},
			"node.k8s.io/v1": {"runtimeclasses": nil},
		} {
			list, err := ts.client.Discovery().ServerResourcesForGroupVersion(gv)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string][]string{}
			for _, r := range list.APIResources {
				if r.Namespaced {
					t.Errorf("%s is namespaced", r.Name)
				}
				got[r.Name] = r.ShortNames
			}
			for name, short := range want {
				if s, ok := got[name]; !ok || !slices.Equal(s, short) {
					t.Errorf("%s: %s short names %v (served: %v), want %v", gv, name, s, ok, short)
				}
			}
		}
	})

	t.Run("kubectl get marks the default storage class", func(t *testing.T) {
		if _, err := kubelet.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "standard",
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}}, Provisioner: "csi.example.com"}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		body, err := ts.client.StorageV1().RESTClient().Get().AbsPath("/apis/storage.k8s.io/v1/storageclasses").
			SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var table metav1.Table
		if err := json.Unmarshal(body, &table); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range table.Rows {
			names = append(names, r.Cells[0].(string))
		}
		if !slices.Equal(names, []string{"local", "standard (default)"}) || table.ColumnDefinitions[1].Name != "Provisioner" {
			t.Errorf("rows %v, columns %v", names, table.ColumnDefinitions)
		}
	})

	t.Run("warnings", func(t *testing.T) {
		warned.take()
		if _, err := kubelet.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "old-labels"}, Handler: "runc",
			Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{"beta.kubernetes.io/arch": "arm64"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		want := `scheduling.nodeSelector: deprecated since v1.14; use "kubernetes.io/arch" instead`
		if got := warned.take(); !slices.Equal(got, []string{want}) {
			t.Errorf("warnings %q, want %q", got, want)
		}
	})
}
