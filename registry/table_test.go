package registry

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The table of a list has a row per item and the list's metadata; of one
// object, its resourceVersion; without headers, no column definitions,
// as upstream's TableConvertor (pkg/registry/core/*/storage).
func TestTableConvertor(t *testing.T) {
	c := configMapDef().tableConvertor()
	remaining := int64(3)
	list := &corev1.ConfigMapList{
		ListMeta: metav1.ListMeta{ResourceVersion: "7", Continue: "next", RemainingItemCount: &remaining},
		Items:    []corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "b"}}},
	}
	table, err := c.ConvertToTable(t.Context(), list, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(table.Rows) != 2 || table.Rows[1].Cells[0] != "b" || table.Rows[0].Object.Object != &list.Items[0] {
		t.Errorf("rows = %+v", table.Rows)
	}
	if table.ResourceVersion != "7" || table.Continue != "next" || !reflect.DeepEqual(table.RemainingItemCount, &remaining) {
		t.Errorf("list metadata = %+v", table.ListMeta)
	}
	if names := []string{table.ColumnDefinitions[0].Name, table.ColumnDefinitions[1].Name, table.ColumnDefinitions[2].Name}; !reflect.DeepEqual(names, []string{"Name", "Data", "Age"}) {
		t.Errorf("columns = %v", names)
	}

	one, err := c.ConvertToTable(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "9"}}, &metav1.TableOptions{NoHeaders: true})
	if err != nil {
		t.Fatal(err)
	}
	if one.ColumnDefinitions != nil || one.ResourceVersion != "9" || len(one.Rows) != 1 {
		t.Errorf("table of one object without headers = %+v", one)
	}

	empty, err := c.ConvertToTable(t.Context(), &corev1.ConfigMapList{}, nil)
	if err != nil || len(empty.Rows) != 0 || len(empty.ColumnDefinitions) != 3 {
		t.Errorf("table of an empty list = %+v, %v", empty, err)
	}
}

// Every kind's columns: kubectl prints priority 0 by default, the others
// with -o wide; every row has a cell per column (checked for each kind's
// rows in its own test).
func TestColumns(t *testing.T) {
	want := map[string][]string{
		"Namespace":      {"Name", "Status", "Age"},
		"Pod":            {"Name", "Ready", "Status", "Restarts", "Age", "IP*", "Node*", "Nominated Node*", "Readiness Gates*"},
		"Node":           {"Name", "Status", "Roles", "Age", "Version", "Internal-IP*", "External-IP*", "OS-Image*", "Kernel-Version*", "Container-Runtime*"},
		"ConfigMap":      {"Name", "Data", "Age"},
		"Secret":         {"Name", "Type", "Data", "Age"},
		"Service":        {"Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age", "Selector*"},
		"Endpoints":      {"Name", "Endpoints", "Age"},
		"Event":          {"Last Seen", "Type", "Reason", "Object", "Subobject*", "Source*", "Message", "First Seen*", "Count*", "Name*"},
		"ServiceAccount": {"Name", "Secrets", "Age"},
		"Lease":          {"Name", "Holder", "Age"},
		"EndpointSlice":  {"Name", "AddressType", "Ports", "Endpoints", "Age"},
		"ServiceCIDR":    {"Name", "CIDRs", "Age"},
		"ResourceSlice":  {"Name", "Node", "Driver", "Pool", "Age"},
		// pkg/printers/internalversion/printers.go
		"CertificateSigningRequest": {"Name", "Age", "SignerName", "Requestor", "RequestedDuration", "Condition"},
		"PodCertificateRequest":     {"Name", "PodName", "ServiceAccountName", "NodeName", "SignerName", "State", "UnverifiedUserAnnotations*"},
		// pkg/printers/internalversion/printers.go's column definitions.
		"StorageClass":     {"Name", "Provisioner", "ReclaimPolicy", "VolumeBindingMode", "AllowVolumeExpansion", "Age"},
		"VolumeAttachment": {"Name", "Attacher", "PV", "Node", "Attached", "Age"},
		"CSINode":          {"Name", "Drivers", "Age"},
		"CSIDriver":        {"Name", "AttachRequired", "PodInfoOnMount", "StorageCapacity", "TokenRequests", "RequiresRepublish", "Modes", "Age"},
		"RuntimeClass":     {"Name", "Handler", "Age"},
	}
	for _, d := range catalog() {
		var got []string
		for _, c := range d.columns {
			name := c.Name
			if c.Priority > 0 {
				name += "*"
			}
			got = append(got, name)
		}
		if !reflect.DeepEqual(got, want[d.kind]) {
			t.Errorf("%s columns = %v, want %v", d.kind, got, want[d.kind])
		}
	}
}
