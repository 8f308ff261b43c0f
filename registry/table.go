package registry

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apiserver/pkg/registry/rest"
)

// Column helpers: kubectl prints priority-0 columns by default and the
// others with -o wide.
func col(name, typ, description string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: typ, Description: description}
}

func wideCol(name, typ, description string) metav1.TableColumnDefinition {
	c := col(name, typ, description)
	c.Priority = 1
	return c
}

var (
	nameCol = metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]}
	ageCol  = col("Age", "string", metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"])
)

// tableConvertor prints a kind's rows for kubectl get, like kube-apiserver's
// printers do.
type tableConvertor struct {
	columns    []metav1.TableColumnDefinition
	row        func(obj runtime.Object) []any
	listRow    func(list runtime.Object) func(obj runtime.Object) []any
	conditions func(obj runtime.Object) []metav1.TableRowCondition
}

func (d *resourceDef) tableConvertor() rest.TableConvertor {
	return tableConvertor{columns: d.columns, row: d.row, listRow: d.listRow, conditions: d.rowConditions}
}

func (c tableConvertor) ConvertToTable(_ context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	table := &metav1.Table{ColumnDefinitions: c.columns}
	if opts, ok := tableOptions.(*metav1.TableOptions); ok && opts.NoHeaders {
		table.ColumnDefinitions = nil
	}
	cells := c.row
	if c.listRow != nil && meta.IsListType(object) {
		cells = c.listRow(object)
	}
	addRow := func(obj runtime.Object) error {
		row := metav1.TableRow{Cells: cells(obj), Object: runtime.RawExtension{Object: obj}}
		if c.conditions != nil {
			row.Conditions = c.conditions(obj)
		}
		table.Rows = append(table.Rows, row)
		return nil
	}
	if meta.IsListType(object) {
		if err := meta.EachListItem(object, addRow); err != nil {
			return nil, err
		}
		if l, err := meta.ListAccessor(object); err == nil {
			table.ResourceVersion = l.GetResourceVersion()
			table.Continue = l.GetContinue()
			table.RemainingItemCount = l.GetRemainingItemCount()
		}
		return table, nil
	}
	if err := addRow(object); err != nil {
		return nil, err
	}
	if m, err := meta.Accessor(object); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
	}
	return table, nil
}

// age prints a timestamp as kubectl does ("5m", "2d3h", "<unknown>").
func age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t.Time))
}

func microAge(t metav1.MicroTime) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t.Time))
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// listMore joins the first max items and says how many more of count
// there are, as kubectl prints endpoints; none is printed for no items.
func listMore(items []string, count, max int, none string) string {
	if len(items) > max {
		items = items[:max]
	}
	s := strings.Join(items, ",")
	if count > max {
		return fmt.Sprintf("%s + %d more...", s, count-max)
	}
	if s == "" {
		return none
	}
	return s
}

func formatLabels(m map[string]string) string {
	if len(m) == 0 {
		return "<none>"
	}
	pairs := make([]string, 0, len(m))
	for k, v := range m {
		pairs = append(pairs, k+"="+v)
	}
	sort.Strings(pairs)
	return strings.Join(pairs, ",")
}
