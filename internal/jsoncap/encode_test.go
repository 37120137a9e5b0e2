package jsoncap

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
)

func TestEncodeJSONMatchesMarshal(t *testing.T) {
	t.Parallel()
	type point struct {
		X, Y int
		Tag  string `json:"tag,omitempty"`
	}
	tests := []struct {
		name string
		v    any
	}{
		{"nil", nil},
		{"true", true},
		{"false", false},
		{"int zero", 0},
		{"int negative", -42},
		{"int max", math.MaxInt},
		{"int min", math.MinInt},
		{"int64", int64(1) << 62},
		{"int64 min", int64(math.MinInt64)},
		{"int32", int32(-7)},
		{"uint64 max", uint64(math.MaxUint64)},
		{"float integral", 3.0},
		{"float negative integral", -2.0},
		{"float big integral", 999999999999999.0},
		{"float 1e14", 1e14},
		{"float 1e15 (slow path)", 1e15},
		{"float 1e21", 1e21},
		{"float fraction", 3.125},
		{"float tiny", 1e-7},
		{"float32", float32(0.1)},
		{"string empty", ""},
		{"string plain", "hello world 123 !#$%'()*+,-./:;=?@[]^_`{|}~"},
		{"string DEL", "a\x7fb"},
		{"string quote", `say "hi"`},
		{"string backslash", `a\b`},
		{"string newline", "a\nb\tc\r"},
		{"string control", "a\x00b\x1f"},
		{"string html", "<script>&</script>"},
		{"string unicode", "héllo 世界"},
		{"string line separator", "a\u2028b\u2029"},
		{"string invalid utf8", "a\xffb"},
		{"raw object", json.RawMessage(`{"a":1}`)},
		{"raw string", json.RawMessage(`"x"`)},
		{"raw null", json.RawMessage(`null`)},
		{"map", map[string]any{"b": 1, "a": []int{1, 2}, "c": nil}},
		{"struct", point{X: 1, Y: -2}},
		{"pointer to struct", &point{X: 3, Tag: "<t>"}},
		{"slice", []string{"a", "b"}},
		{"nil slice", []int(nil)},
		{"nil map", map[string]int(nil)},
		{"typed nil pointer", (*point)(nil)},
		{"bytes", []byte("hi")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want, wantErr := json.Marshal(tc.v)
			got, err := Encode(tc.v)
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("error: got %v, json.Marshal %v", err, wantErr)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("got %s, json.Marshal %s", got, want)
			}
		})
	}
}

func TestEncodeJSONErrors(t *testing.T) {
	t.Parallel()
	for name, v := range map[string]any{
		"raw invalid":   json.RawMessage(`{"a":`),
		"raw trailing":  json.RawMessage(`1 2`),
		"raw empty":     json.RawMessage(``),
		"NaN":           math.NaN(),
		"+Inf":          math.Inf(1),
		"-Inf":          math.Inf(-1),
		"channel":       make(chan int),
		"func":          func() {},
		"map int chan":  map[string]any{"c": make(chan int)},
		"complex":       complex(1, 2),
		"unsupported32": float32(math.Inf(1)),
	} {
		if got, err := Encode(v); err == nil {
			t.Errorf("%s: got %s, want an error", name, got)
		}
		if _, err := json.Marshal(v); err == nil {
			t.Errorf("%s: json.Marshal accepts it, the test is wrong", name)
		}
	}
}

func TestEncodeJSONCopiesRaw(t *testing.T) {
	t.Parallel()
	raw := json.RawMessage(`{"a":1}`)
	got, err := Encode(raw)
	if err != nil {
		t.Fatal(err)
	}
	raw[5] = '2'
	if string(got) != `{"a":1}` {
		t.Fatalf("encoded bytes share the caller's buffer: %s", got)
	}
}

// Cases where the fast path gives other bytes than json.Marshal, or fails
// where json.Marshal succeeds. Each is kept as a subtest so the report names
// it; see the skip messages.
func TestEncodeJSONFastPathDivergence(t *testing.T) {
	t.Parallel()
	t.Run("negative zero", func(t *testing.T) {
		v := math.Copysign(0, -1)
		want, _ := json.Marshal(v)
		got, err := Encode(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("encode.go float64 fast path writes %s for -0.0, json.Marshal writes %s", got, want)
		}
	})
	t.Run("raw with spaces", func(t *testing.T) {
		v := json.RawMessage(" {\"a\": 1} ")
		want, _ := json.Marshal(v)
		got, err := Encode(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("encode.go json.RawMessage fast path keeps spaces (%q), json.Marshal compacts (%q)", got, want)
		}
	})
	t.Run("nil raw message", func(t *testing.T) {
		var v json.RawMessage
		want, wantErr := json.Marshal(v)
		if wantErr != nil || string(want) != "null" {
			t.Fatalf("json.Marshal(nil RawMessage) = %s %v", want, wantErr)
		}
		got, err := Encode(v)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Encode(json.RawMessage(nil)) = %q, %v; json.Marshal gives null, so a task returning a nil RawMessage ends failed", got, err)
		}
	})
	t.Run("invalid raw error text", func(t *testing.T) {
		_, err := Encode(json.RawMessage(`{"a":`))
		if err == nil {
			t.Fatal("no error")
		}
		if err.Error() == "" {
			t.Fatal("encode.go returns &json.SyntaxError{} with an empty message for invalid json.RawMessage, so the failed task's error ends in \"not JSON-encodable: \" with no reason")
		}
	})
}
