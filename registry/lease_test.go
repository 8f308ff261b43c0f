package registry

import (
	"reflect"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestValidateLeaseSpec in k8s.io/kubernetes
// pkg/apis/coordination/validation/validation_test.go: duration must be
// positive, transitions not negative. kubestore does not check the
// strategy and preferredHolder of coordinated leader election
// (CoordinatedLeaderElection, off by default upstream).
func TestLeaseValidate(t *testing.T) {
	lease := func(name string, spec coordinationv1.LeaseSpec) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-node-lease"}, Spec: spec}
	}
	tests := []struct {
		name  string
		lease *coordinationv1.Lease
		errs  int
	}{
		{"valid", lease("node-1", coordinationv1.LeaseSpec{HolderIdentity: ptrTo("node-1"), LeaseDurationSeconds: ptrTo(int32(40)), LeaseTransitions: ptrTo(int32(0))}), 0},
		{"empty spec", lease("node-1", coordinationv1.LeaseSpec{}), 0},
		{"zero duration and negative transitions",
			lease("node-1", coordinationv1.LeaseSpec{HolderIdentity: ptrTo("holder"), LeaseDurationSeconds: ptrTo(int32(0)), LeaseTransitions: ptrTo(int32(-1))}), 2},
		{"name is a DNS subdomain", lease("node.example.com", coordinationv1.LeaseSpec{}), 0},
		{"invalid name", lease("Node_1", coordinationv1.LeaseSpec{}), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if errs := validateCreate(t, leaseDef(), tt.lease); len(errs) != tt.errs {
				t.Errorf("%d errors, want %d: %v", len(errs), tt.errs, errs.ToAggregate())
			}
		})
	}
}

// printLease in k8s.io/kubernetes pkg/printers/internalversion/printers.go.
func TestLeaseTable(t *testing.T) {
	tests := []struct {
		name   string
		holder *string
		want   []any
	}{
		{"holder", ptrTo("node-1"), []any{"l", "node-1", "<unknown>"}},
		{"no holder", nil, []any{"l", "", "<unknown>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: tt.holder}}
			if got := tableRow(t, leaseDef(), l); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("row = %#v, want %#v", got, tt.want)
			}
		})
	}
}
