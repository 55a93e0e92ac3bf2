package comm

import (
	"bytes"
	"encoding/gob"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// codecPayload is the benchmark value: a struct with a map, strings, a
// nested slice and a pointer, about what a configuration broadcast carries.
type codecPayload struct {
	Name    string
	Step    int64
	Weights []float64
	Labels  map[string]string
	Child   *codecPayload
}

func samplePayload() codecPayload {
	return codecPayload{
		Name:    "cholesky-run-17",
		Step:    123456,
		Weights: []float64{0.5, 1.25, -3, 1e-9, 42, 7, 8, 9},
		Labels:  map[string]string{"policy": "dmda", "host": "node017", "gpu": "h100"},
		Child:   &codecPayload{Name: "child", Step: 1},
	}
}

func TestCodecRoundTrip(t *testing.T) {
	p := samplePayload()
	b, err := Encode(p)
	require.NoError(t, err)
	var q codecPayload
	require.NoError(t, Decode(b, &q))
	assert.Equal(t, p, q)

	_, err = Encode(make(chan int))
	assert.Error(t, err)
	assert.Error(t, Decode([]byte{0xff, 0x00}, &q))

	// The payload framing reports encode failures to the receiver.
	pl := encodePayload(func() {})
	_, err = decodePayload[int]("X", 3, pl)
	var ae *ArgError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, 3, ae.Rank)
	v, err := decodePayload[string]("X", 0, encodePayload("hi"))
	require.NoError(t, err)
	assert.Equal(t, "hi", v)
	_, err = decodePayload[string]("X", 0, nil)
	assert.ErrorIs(t, err, ErrInvalidArg)
}

// BenchmarkCodec compares CBOR with encoding/gob for one value per message,
// which is how collectives use the codec: gob needs a fresh Encoder and
// Decoder per message, because the receivers of a broadcast differ from
// call to call and a decoder must see the type description first.
func BenchmarkCodec(b *testing.B) {
	p := samplePayload()
	values := map[string]any{
		"struct": p,
		"map":    p.Labels,
		"string": "a moderately long string of configuration text, 64 bytes long.",
	}
	for _, name := range []string{"struct", "map", "string"} {
		v := values[name]
		b.Run(fmt.Sprintf("cbor/%s", name), func(b *testing.B) {
			var size int
			for b.Loop() {
				buf, err := Encode(v)
				if err != nil {
					b.Fatal(err)
				}
				size = len(buf)
				if err := decodeInto(name, buf, false); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(size), "bytes/msg")
		})
		b.Run(fmt.Sprintf("gob/%s", name), func(b *testing.B) {
			var size int
			for b.Loop() {
				var buf bytes.Buffer
				if err := gob.NewEncoder(&buf).Encode(v); err != nil {
					b.Fatal(err)
				}
				size = buf.Len()
				if err := decodeInto(name, buf.Bytes(), true); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(size), "bytes/msg")
		})
	}
}

func decodeInto(name string, data []byte, useGob bool) error {
	var dst any
	switch name {
	case "struct":
		dst = new(codecPayload)
	case "map":
		dst = new(map[string]string)
	default:
		dst = new(string)
	}
	if useGob {
		return gob.NewDecoder(bytes.NewReader(data)).Decode(dst)
	}
	return Decode(data, dst)
}
