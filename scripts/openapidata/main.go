// Command openapidata writes the OpenAPI definitions of openapi-gen's Go
// code (server/openapi/generated) as the data the binary embeds
// (server/openapi/zz_generated.openapi.bin, in the format that
// server/openapi decodes) and the Go table of the named types its values
// hold (zz_generated.openapi_values.go). scripts/generate runs it after
// openapi-gen, then the test that compares the two.
//
//	go run ./scripts/openapidata [-dir server/openapi]
package main

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"flag"
	"fmt"
	"go/format"
	"math"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kubestore/kubestore/server/openapi/generated"
	"github.com/kubestore/kubestore/server/openapi/wire"
)

func main() {
	dir := flag.String("dir", "server/openapi", "the directory of the package that embeds the data")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "openapidata:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	// A reference is written as the name it was made from.
	defs := generated.GetOpenAPIDefinitions(func(name string) spec.Ref { return spec.MustCreateRef(name) })
	typed := typedValues(defs)
	e := &encoder{typed: typed, count: map[string]int{}, first: map[string]int{}}
	if err := e.definitions(defs); err != nil { // counts the strings
		return err
	}
	e.index = e.table()
	e.buf.Reset()
	if err := e.definitions(defs); err != nil {
		return err
	}
	var out bytes.Buffer
	e.uint(&out, wire.Version)
	e.uint(&out, uint64(len(e.strs)))
	for _, s := range e.strs {
		e.uint(&out, uint64(len(s)))
		out.WriteString(s)
	}
	out.Write(e.buf.Bytes())
	if err := os.WriteFile(filepath.Join(dir, "zz_generated.openapi.bin"), out.Bytes(), 0o644); err != nil {
		return err
	}
	src, err := typedValuesSource(typed)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "zz_generated.openapi_values.go"), src, 0o644)
}

type encoder struct {
	typed []reflect.Type
	buf   bytes.Buffer
	// count and first (the order of first use) are filled by the first
	// pass; index and strs by table.
	count map[string]int
	first map[string]int
	index map[string]int
	strs  []string
}

// table orders the strings by use, most used first (the first 128 indexes
// take a byte), then in the order of their first use.
func (e *encoder) table() map[string]int {
	e.strs = make([]string, 0, len(e.count))
	for s := range e.count {
		e.strs = append(e.strs, s)
	}
	slices.SortFunc(e.strs, func(a, b string) int {
		return cmp.Or(cmp.Compare(e.count[b], e.count[a]), cmp.Compare(e.first[a], e.first[b]))
	})
	index := make(map[string]int, len(e.strs))
	for i, s := range e.strs {
		index[s] = i
	}
	return index
}

func (e *encoder) uint(w *bytes.Buffer, v uint64) {
	w.Write(binary.AppendUvarint(nil, v))
}

func (e *encoder) str(s string) {
	if e.index == nil {
		if _, ok := e.count[s]; !ok {
			e.first[s] = len(e.first)
		}
		e.count[s]++
		e.buf.WriteByte(0)
		return
	}
	e.uint(&e.buf, uint64(e.index[s]))
}

func (e *encoder) len(n int) { e.uint(&e.buf, uint64(n)) }

func (e *encoder) definitions(defs map[string]common.OpenAPIDefinition) error {
	names := sortedKeys(defs)
	e.len(len(names))
	for _, name := range names {
		d := defs[name]
		e.str(name)
		if err := e.schema(&d.Schema); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if d.Dependencies == nil {
			e.buf.WriteByte(0)
		} else {
			e.buf.WriteByte(1)
			e.strList(d.Dependencies)
		}
	}
	return nil
}

func (e *encoder) strList(l []string) {
	e.len(len(l))
	for _, s := range l {
		e.str(s)
	}
}

func (e *encoder) schema(s *spec.Schema) error {
	// Whatever the format does not hold must be zero.
	rest := *s
	rest.Extensions, rest.Description, rest.Type, rest.Format, rest.Ref = nil, "", nil, "", spec.Ref{}
	rest.Default, rest.Properties, rest.Items, rest.Required, rest.Enum = nil, nil, nil, nil, nil
	rest.AdditionalProperties, rest.OneOf, rest.AllOf, rest.AnyOf = nil, nil, nil, nil
	rest.Nullable, rest.Title, rest.Pattern = false, "", ""
	if !reflect.DeepEqual(rest, spec.Schema{}) {
		return fmt.Errorf("a schema field the format does not hold (extend it in server/openapi and here): %#v", rest)
	}
	var fields uint64
	for _, f := range []struct {
		bit uint64
		set bool
	}{
		{wire.SchemaExtensions, s.Extensions != nil},
		{wire.SchemaDescription, s.Description != ""},
		{wire.SchemaType, s.Type != nil},
		{wire.SchemaFormat, s.Format != ""},
		{wire.SchemaRef, s.Ref.String() != ""},
		{wire.SchemaDefault, s.Default != nil},
		{wire.SchemaProperties, s.Properties != nil},
		{wire.SchemaItems, s.Items != nil},
		{wire.SchemaRequired, s.Required != nil},
		{wire.SchemaEnum, s.Enum != nil},
		{wire.SchemaAdditionalProperties, s.AdditionalProperties != nil},
		{wire.SchemaOneOf, s.OneOf != nil},
		{wire.SchemaAllOf, s.AllOf != nil},
		{wire.SchemaAnyOf, s.AnyOf != nil},
		{wire.SchemaNullable, s.Nullable},
		{wire.SchemaTitle, s.Title != ""},
		{wire.SchemaPattern, s.Pattern != ""},
	} {
		if f.set {
			fields |= f.bit
		}
	}
	e.uint(&e.buf, fields)
	if s.Extensions != nil {
		keys := sortedKeys(s.Extensions)
		e.len(len(keys))
		for _, k := range keys {
			e.str(k)
			if err := e.value(s.Extensions[k]); err != nil {
				return fmt.Errorf("extension %s: %w", k, err)
			}
		}
	}
	if s.Description != "" {
		e.str(s.Description)
	}
	if s.Type != nil {
		e.strList(s.Type)
	}
	if s.Format != "" {
		e.str(s.Format)
	}
	if ref := s.Ref.String(); ref != "" {
		if r := spec.MustCreateRef(ref); r.String() != ref {
			return fmt.Errorf("reference %q does not survive a round trip", ref)
		}
		e.str(ref)
	}
	if s.Default != nil {
		if err := e.value(s.Default); err != nil {
			return fmt.Errorf("default: %w", err)
		}
	}
	if s.Properties != nil {
		if err := e.schemaMap(s.Properties); err != nil {
			return err
		}
	}
	if s.Items != nil {
		var flags byte
		if s.Items.Schema != nil {
			flags |= 1
		}
		if s.Items.Schemas != nil {
			flags |= 2
		}
		e.buf.WriteByte(flags)
		if s.Items.Schema != nil {
			if err := e.schema(s.Items.Schema); err != nil {
				return fmt.Errorf("items: %w", err)
			}
		}
		if s.Items.Schemas != nil {
			if err := e.schemaList(s.Items.Schemas); err != nil {
				return fmt.Errorf("items: %w", err)
			}
		}
	}
	if s.Required != nil {
		e.strList(s.Required)
	}
	if s.Enum != nil {
		if err := e.values(s.Enum); err != nil {
			return fmt.Errorf("enum: %w", err)
		}
	}
	if a := s.AdditionalProperties; a != nil {
		var flags byte
		if a.Allows {
			flags |= 1
		}
		if a.Schema != nil {
			flags |= 2
		}
		e.buf.WriteByte(flags)
		if a.Schema != nil {
			if err := e.schema(a.Schema); err != nil {
				return fmt.Errorf("additionalProperties: %w", err)
			}
		}
	}
	for _, l := range [][]spec.Schema{s.OneOf, s.AllOf, s.AnyOf} {
		if l != nil {
			if err := e.schemaList(l); err != nil {
				return err
			}
		}
	}
	if s.Title != "" {
		e.str(s.Title)
	}
	if s.Pattern != "" {
		e.str(s.Pattern)
	}
	return nil
}

func (e *encoder) schemaMap(m map[string]spec.Schema) error {
	keys := sortedKeys(m)
	e.len(len(keys))
	for _, k := range keys {
		e.str(k)
		s := m[k]
		if err := e.schema(&s); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	return nil
}

func (e *encoder) schemaList(l []spec.Schema) error {
	e.len(len(l))
	for i := range l {
		if err := e.schema(&l[i]); err != nil {
			return fmt.Errorf("[%d]: %w", i, err)
		}
	}
	return nil
}

func (e *encoder) values(l []any) error {
	e.len(len(l))
	for i, v := range l {
		if err := e.value(v); err != nil {
			return fmt.Errorf("[%d]: %w", i, err)
		}
	}
	return nil
}

func (e *encoder) value(v any) error {
	switch v := v.(type) {
	case nil:
		e.buf.WriteByte(wire.ValueNil)
	case string:
		e.buf.WriteByte(wire.ValueString)
		e.str(v)
	case bool:
		if v {
			e.buf.WriteByte(wire.ValueTrue)
		} else {
			e.buf.WriteByte(wire.ValueFalse)
		}
	case int:
		e.buf.WriteByte(wire.ValueInt)
		e.uint(&e.buf, zigzag(int64(v)))
	case int64:
		e.buf.WriteByte(wire.ValueInt64)
		e.uint(&e.buf, zigzag(v))
	case float64:
		e.buf.WriteByte(wire.ValueFloat64)
		e.uint(&e.buf, math.Float64bits(v))
	case []any:
		e.buf.WriteByte(wire.ValueList)
		return e.values(v)
	case map[string]any:
		e.buf.WriteByte(wire.ValueObject)
		keys := sortedKeys(v)
		e.len(len(keys))
		for _, k := range keys {
			e.str(k)
			if err := e.value(v[k]); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
		}
	case spec.Schema:
		e.buf.WriteByte(wire.ValueSchema)
		return e.schema(&v)
	default:
		t := reflect.TypeOf(v)
		i := slices.Index(e.typed, t)
		if i < 0 {
			return fmt.Errorf("a value of type %s the format does not hold", t)
		}
		e.buf.WriteByte(wire.ValueTyped)
		e.uint(&e.buf, uint64(i))
		e.str(reflect.ValueOf(v).String())
	}
	return nil
}

func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

// typedValues are the named string types of the values in defs (enum
// constants as defaults), in the order of their names.
func typedValues(defs map[string]common.OpenAPIDefinition) []reflect.Type {
	seen := map[reflect.Type]bool{}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Interface:
			if !v.IsNil() {
				e := v.Elem()
				if e.Kind() == reflect.String && e.Type().PkgPath() != "" {
					seen[e.Type()] = true
				}
				walk(e)
			}
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					walk(v.Field(i))
				}
			}
		case reflect.Slice:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		case reflect.Map:
			for it := v.MapRange(); it.Next(); {
				walk(it.Value())
			}
		}
	}
	walk(reflect.ValueOf(defs))
	types := make([]reflect.Type, 0, len(seen))
	for t := range seen {
		types = append(types, t)
	}
	slices.SortFunc(types, func(a, b reflect.Type) int {
		return cmp.Or(cmp.Compare(a.PkgPath(), b.PkgPath()), cmp.Compare(a.Name(), b.Name()))
	})
	return types
}

var version = regexp.MustCompile(`^v[0-9]+((alpha|beta)[0-9]+)?$`)

func typedValuesSource(types []reflect.Type) ([]byte, error) {
	aliases := map[string]string{} // by package path
	used := map[string]bool{}
	var paths []string
	for _, t := range types {
		p := t.PkgPath()
		if _, ok := aliases[p]; ok {
			continue
		}
		alias := path.Base(p)
		if version.MatchString(alias) {
			alias = path.Base(path.Dir(p)) + alias
		}
		alias = strings.NewReplacer("-", "", ".", "").Replace(alias)
		for n, a := 2, alias; used[alias]; n++ {
			alias = fmt.Sprintf("%s%d", a, n)
		}
		aliases[p], used[alias] = alias, true
		paths = append(paths, p)
	}
	var b bytes.Buffer
	b.WriteString("// Code generated by scripts/openapidata. DO NOT EDIT.\n\npackage openapi\n\n")
	if len(paths) > 0 {
		b.WriteString("import (\n")
		for _, p := range paths {
			fmt.Fprintf(&b, "%s %q\n", aliases[p], p)
		}
		b.WriteString(")\n\n")
	}
	b.WriteString("// typedValues make the values of named string types in the definitions:\n// an index in this list and the string (wire.ValueTyped).\n")
	b.WriteString("var typedValues = []func(string) any{\n")
	for _, t := range types {
		fmt.Fprintf(&b, "func(s string) any { return %s.%s(s) },\n", aliases[t.PkgPath()], t.Name())
	}
	b.WriteString("}\n")
	return format.Source(b.Bytes())
}

func sortedKeys[V any, M ~map[string]V](m M) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
