package cacher

import (
	"context"
	"runtime"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubestore/kubestore/memory"
)

func TestHeapGuard(t *testing.T) {
	if NewHeapGuard(memory.Limits{}) != nil {
		t.Error("NewHeapGuard without a limit guards something")
	}
	gr := schema.GroupResource{Resource: "configmaps"}
	runtime.GC() // the live heap is the last collection's
	live := int64(memory.LiveHeap())
	if live <= 0 {
		t.Fatalf("live heap %d", live)
	}

	roomy := NewHeapGuard(memory.Limits{Limit: 2*live + 64<<20, LimitFrom: "--memory-limit=roomy"})
	if err := roomy.admit(gr, "/registry/configmaps/ns/a"); err != nil {
		t.Errorf("below the watermark: %v", err)
	}

	// A limit the heap is already above: the watermark is exceeded.
	tight := NewHeapGuard(memory.Limits{Limit: live / 2, LimitFrom: "--memory-limit=tight"})
	err := tight.admit(gr, "/registry/configmaps/ns/a")
	if !apierrors.IsForbidden(err) {
		t.Fatalf("above the watermark: %v, want Forbidden", err)
	}
	msg := err.Error()
	for _, want := range []string{`configmaps "a" is forbidden`, "live heap", "80% of its memory limit", "--memory-limit=tight", "deletes make room"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}

	// Only creates are guarded.
	s := withHeapGuard(nil, gr, tight).(*heapGuarded)
	if err := s.Create(context.Background(), "/registry/configmaps/ns/b", nil, nil, 0); !apierrors.IsForbidden(err) {
		t.Errorf("Create above the watermark: %v, want Forbidden", err)
	}
	if withHeapGuard(nil, gr, nil) != nil {
		t.Error("a nil guard wraps the storage")
	}
}
