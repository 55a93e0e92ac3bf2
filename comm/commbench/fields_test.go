package commbench

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestResultFieldsDocumented: every JSON field of a Result line is
// documented with pzrun bench comm's output in docs/pzrun.md (a field
// `note` was declared that nothing set and no document named).
func TestResultFieldsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/pzrun.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(doc), "\n## bench comm\n")
	require.True(t, ok, "docs/pzrun.md has a bench comm section")
	section, _, _ = strings.Cut(section, "\n## ")
	typ := reflect.TypeFor[Result]()
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		assert.Contains(t, section, "`"+name+"`", "field %s", typ.Field(i).Name)
	}
}
