// Package wire is the format of the OpenAPI definitions kubestore embeds:
// its one home, for the writer (scripts/openapidata) and the reader
// (server/openapi).
package wire

// Every number is an unsigned varint. The data opens with the format's
// Version and the string table (its length and the strings, each its
// length and bytes); a string is then its index in the table. Then the
// number of definitions, each its name, its schema and its dependencies (a
// byte, 0 when they are nil, then the list).
//
// A schema is a bit set of the fields it has (Schema* below), then those
// fields in the bits' order. A list or map of a field present is its
// length and its items (a map's, each key then value, keys in order);
// Nullable has no value. Items is a byte of flags (1: Schema, 2: Schemas)
// then those; AdditionalProperties a byte (1: Allows, 2: Schema) then the
// schema. An any (Default, Enum's items, Extensions' values) is a tag
// (Value*) and its value.
const Version = 1

const (
	SchemaExtensions = 1 << iota
	SchemaDescription
	SchemaType
	SchemaFormat
	SchemaRef
	SchemaDefault
	SchemaProperties
	SchemaItems
	SchemaRequired
	SchemaEnum
	SchemaAdditionalProperties
	SchemaOneOf
	SchemaAllOf
	SchemaAnyOf
	SchemaNullable
	SchemaTitle
	SchemaPattern
)

const (
	ValueNil = iota
	ValueString
	ValueFalse
	ValueTrue
	ValueInt     // int, zigzag
	ValueInt64   // int64, zigzag
	ValueFloat64 // its IEEE 754 bits
	ValueList    // []any
	ValueObject  // map[string]any
	ValueTyped   // a named string type: its index in the package openapi's typedValues, the string
	ValueSchema  // spec.Schema (x-kubernetes-v2-schema)
)
