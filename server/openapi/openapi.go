// Package openapi holds the OpenAPI definitions of the k8s.io/api types
// kubestore serves. Server-side apply builds its type converter from them
// and kubectl explain/apply read them through /openapi/v2 and /openapi/v3.
//
// openapi-gen writes them as Go code (generated/), one function per type
// that builds its schema literal by literal: 1.1 MB of machine code that
// runs a few times at most. The binary embeds them as data instead
// (zz_generated.openapi.bin, written from generated/ by
// scripts/openapidata; both by make generate), decoded on each call into
// exactly what generated.GetOpenAPIDefinitions returns (openapi_test.go).
//
// /openapi/v2 and /openapi/v3 are served from them as kube-apiserver serves
// them, but built on their first request (serve.go).
package openapi

import (
	_ "embed"
	"fmt"
	"math"

	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kubestore/kubestore/server/openapi/wire"
)

//go:embed zz_generated.openapi.bin
var definitions string

// GetOpenAPIDefinitions returns the OpenAPI definitions of the served
// types by name, as openapi-gen's function of the same name does: new
// values on every call, references made by ref.
func GetOpenAPIDefinitions(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	defs, err := decode(definitions, ref)
	if err != nil {
		// The data is built into the binary and checked by the tests.
		panic(fmt.Sprintf("decoding the embedded OpenAPI definitions: %v", err))
	}
	return defs
}

// decode decodes definitions in the format of package wire.
func decode(data string, ref common.ReferenceCallback) (defs map[string]common.OpenAPIDefinition, err error) {
	d := decoder{data: data, ref: ref}
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(decodeError); ok {
				defs, err = nil, e
				return
			}
			panic(r)
		}
	}()
	if v := d.uint(); v != wire.Version {
		return nil, fmt.Errorf("format version %d, want %d", v, wire.Version)
	}
	d.strings = make([]string, d.len())
	for i := range d.strings {
		n := d.len()
		if n > len(d.data)-d.pos {
			d.fail("string %d overruns the data", i)
		}
		d.strings[i] = d.data[d.pos : d.pos+n]
		d.pos += n
	}
	n := d.len()
	defs = make(map[string]common.OpenAPIDefinition, n)
	for range n {
		name := d.string()
		var def common.OpenAPIDefinition
		d.schema(&def.Schema)
		if d.byte() != 0 {
			def.Dependencies = d.stringList()
		}
		defs[name] = def
	}
	if d.pos != len(d.data) {
		d.fail("%d bytes after the definitions", len(d.data)-d.pos)
	}
	return defs, nil
}

type decodeError struct{ error }

type decoder struct {
	data    string
	pos     int
	strings []string
	ref     common.ReferenceCallback
}

func (d *decoder) fail(format string, args ...any) {
	panic(decodeError{fmt.Errorf("at byte %d: "+format, append([]any{d.pos}, args...)...)})
}

func (d *decoder) uint() uint64 {
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if d.pos >= len(d.data) {
			d.fail("truncated")
		}
		b := d.data[d.pos]
		d.pos++
		v |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return v
		}
	}
	d.fail("varint overflows 64 bits")
	return 0
}

// len reads a length, bounded by the bytes left (each item takes one at
// least) so that corrupt data cannot ask for a huge allocation.
func (d *decoder) len() int {
	n := d.uint()
	if n > uint64(len(d.data)-d.pos) {
		d.fail("length %d overruns the data", n)
	}
	return int(n)
}

func (d *decoder) byte() byte {
	if d.pos >= len(d.data) {
		d.fail("truncated")
	}
	b := d.data[d.pos]
	d.pos++
	return b
}

func (d *decoder) string() string {
	i := d.uint()
	if i >= uint64(len(d.strings)) {
		d.fail("string %d of %d", i, len(d.strings))
	}
	return d.strings[i]
}

func (d *decoder) stringList() []string {
	l := make([]string, d.len())
	for i := range l {
		l[i] = d.string()
	}
	return l
}

func (d *decoder) schema(s *spec.Schema) {
	fields := d.uint()
	if fields >= wire.SchemaPattern<<1 {
		d.fail("unknown schema fields %#x", fields)
	}
	if fields&wire.SchemaExtensions != 0 {
		n := d.len()
		s.Extensions = make(spec.Extensions, n)
		for range n {
			k := d.string()
			s.Extensions[k] = d.value()
		}
	}
	if fields&wire.SchemaDescription != 0 {
		s.Description = d.string()
	}
	if fields&wire.SchemaType != 0 {
		s.Type = d.stringList()
	}
	if fields&wire.SchemaFormat != 0 {
		s.Format = d.string()
	}
	if fields&wire.SchemaRef != 0 {
		s.Ref = d.ref(d.string())
	}
	if fields&wire.SchemaDefault != 0 {
		s.Default = d.value()
	}
	if fields&wire.SchemaProperties != 0 {
		s.Properties = d.schemaMap()
	}
	if fields&wire.SchemaItems != 0 {
		s.Items = &spec.SchemaOrArray{}
		flags := d.byte()
		if flags&1 != 0 {
			s.Items.Schema = &spec.Schema{}
			d.schema(s.Items.Schema)
		}
		if flags&2 != 0 {
			s.Items.Schemas = d.schemaList()
		}
	}
	if fields&wire.SchemaRequired != 0 {
		s.Required = d.stringList()
	}
	if fields&wire.SchemaEnum != 0 {
		s.Enum = d.values()
	}
	if fields&wire.SchemaAdditionalProperties != 0 {
		s.AdditionalProperties = &spec.SchemaOrBool{}
		flags := d.byte()
		s.AdditionalProperties.Allows = flags&1 != 0
		if flags&2 != 0 {
			s.AdditionalProperties.Schema = &spec.Schema{}
			d.schema(s.AdditionalProperties.Schema)
		}
	}
	if fields&wire.SchemaOneOf != 0 {
		s.OneOf = d.schemaList()
	}
	if fields&wire.SchemaAllOf != 0 {
		s.AllOf = d.schemaList()
	}
	if fields&wire.SchemaAnyOf != 0 {
		s.AnyOf = d.schemaList()
	}
	s.Nullable = fields&wire.SchemaNullable != 0
	if fields&wire.SchemaTitle != 0 {
		s.Title = d.string()
	}
	if fields&wire.SchemaPattern != 0 {
		s.Pattern = d.string()
	}
}

func (d *decoder) schemaMap() map[string]spec.Schema {
	n := d.len()
	m := make(map[string]spec.Schema, n)
	for range n {
		k := d.string()
		var s spec.Schema
		d.schema(&s)
		m[k] = s
	}
	return m
}

func (d *decoder) schemaList() []spec.Schema {
	l := make([]spec.Schema, d.len())
	for i := range l {
		d.schema(&l[i])
	}
	return l
}

func (d *decoder) values() []any {
	l := make([]any, d.len())
	for i := range l {
		l[i] = d.value()
	}
	return l
}

func (d *decoder) value() any {
	switch tag := d.byte(); tag {
	case wire.ValueNil:
		return nil
	case wire.ValueString:
		return d.string()
	case wire.ValueFalse:
		return false
	case wire.ValueTrue:
		return true
	case wire.ValueInt:
		return int(zigzag(d.uint()))
	case wire.ValueInt64:
		return zigzag(d.uint())
	case wire.ValueFloat64:
		return math.Float64frombits(d.uint())
	case wire.ValueList:
		return d.values()
	case wire.ValueObject:
		n := d.len()
		m := make(map[string]any, n)
		for range n {
			k := d.string()
			m[k] = d.value()
		}
		return m
	case wire.ValueTyped:
		t := d.uint()
		if t >= uint64(len(typedValues)) {
			d.fail("typed value %d of %d", t, len(typedValues))
		}
		return typedValues[t](d.string())
	case wire.ValueSchema:
		var s spec.Schema
		d.schema(&s)
		return s
	default:
		d.fail("unknown value tag %d", tag)
		return nil
	}
}

func zigzag(u uint64) int64 {
	return int64(u>>1) ^ -int64(u&1)
}
