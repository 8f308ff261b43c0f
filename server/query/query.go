// Package query checks the query parameters of an API request that the
// upstream handlers would otherwise answer badly: with a 500 (a
// resourceVersion that is not a number on a GET or WATCH), with an empty
// watch (a negative timeoutSeconds), or with a message that does not name
// the parameter (selectors, limit).
package query

import (
	"fmt"
	"net/url"
	"strconv"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// Check returns an error naming the first parameter of q that cannot be
// parsed. It looks at the first value of each parameter, the one the
// handlers use.
func Check(q url.Values) error {
	first := func(name string) (string, bool) {
		v, ok := q[name]
		if !ok || len(v) == 0 {
			return "", false
		}
		return v[0], true
	}
	if v, ok := first("resourceVersion"); ok && v != "" {
		if _, err := strconv.ParseUint(v, 10, 64); err != nil {
			return fmt.Errorf("invalid resourceVersion %q: must be a resourceVersion returned by the server (a decimal number)", v)
		}
	}
	for _, name := range []string{"timeoutSeconds", "limit"} {
		// Present but empty is refused too: upstream cannot decode it.
		if v, ok := first(name); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return fmt.Errorf("invalid %s %q: must be an integer", name, v)
			}
			if name == "timeoutSeconds" && n < 0 {
				return fmt.Errorf("invalid timeoutSeconds %d: must not be negative", n)
			}
		}
	}
	if v, ok := first("labelSelector"); ok {
		if _, err := labels.Parse(v); err != nil {
			return fmt.Errorf("invalid labelSelector %q: %v", v, err)
		}
	}
	if v, ok := first("fieldSelector"); ok {
		if _, err := fields.ParseSelector(v); err != nil {
			return fmt.Errorf("invalid fieldSelector %q: %v", v, err)
		}
	}
	return nil
}
