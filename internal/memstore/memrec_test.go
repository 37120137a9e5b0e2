package memstore

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/bgtask/bgtask/bgtype"
)

// fillNonZero sets every field of the struct v points to, recursively, to a
// value that is not zero; it fails on a kind it does not know, so a new
// field of a new kind is noticed here.
func fillNonZero(t *testing.T, v reflect.Value, n *int64) {
	t.Helper()
	*n++
	switch v.Kind() {
	case reflect.String:
		v.SetString("s" + string(rune('a'+*n%26)))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(*n)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillNonZero(t, v.Elem(), n)
	case reflect.Slice:
		if v.Type() == reflect.TypeFor[json.RawMessage]() {
			v.SetBytes([]byte(`{"n":1}`))
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fillNonZero(t, v.Index(i), n)
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(1_700_000_000+*n, *n).UTC()))
			return
		}
		for i := range v.NumField() {
			fillNonZero(t, v.Field(i), n)
		}
	default:
		t.Fatalf("fillNonZero: %s of kind %s: teach the test (and memRec) this kind", v.Type(), v.Kind())
	}
}

// Every field of a terminal record survives the compact form: the test
// fills each field of TaskMeta, whatever fields it has now or later, so a
// field that memRec forgets fails here.
func TestMemRecRoundTrip(t *testing.T) {
	t.Parallel()
	for i, st := range []bgtype.Status{bgtype.StatusCompleted, bgtype.StatusFailed, bgtype.StatusCanceled, bgtype.StatusInterrupted} {
		var m bgtype.TaskMeta
		n := int64(i)
		fillNonZero(t, reflect.ValueOf(&m).Elem(), &n)
		m.Status = st
		if n%2 == 0 {
			m.Wake = bgtype.WakeOnActivity // a coded policy; odd rounds keep the filler's, which is not
			m.Type = bgtype.TypeSubAgent   // a coded type, likewise
		}
		v := reflect.ValueOf(m)
		for i := range v.NumField() {
			if v.Field(i).IsZero() {
				t.Fatalf("field %s left zero", v.Type().Field(i).Name)
			}
		}
		var r Rec
		r.Set(&m)
		if got := r.Expand(); !reflect.DeepEqual(got, m) {
			t.Fatalf("%s: round trip\n got %+v\nwant %+v", st, got, m)
		}
	}
}

// A plain finished record keeps no side struct, and the compact entry
// stays in its size class.
func TestMemRecCompact(t *testing.T) {
	t.Parallel()
	m := bgtype.TaskMeta{ID: "task_a", Owner: "o", Type: bgtype.TypeTask, Status: bgtype.StatusCompleted, Result: json.RawMessage(`42`), Wake: bgtype.WakeOnTerminal,
		Instance: "inst_1", Tags: []string{},
		CreatedAt: time.Unix(1, 0).UTC(), FinishedAt: time.Unix(2, 0).UTC()}
	var r Rec
	r.Set(&m)
	if r.rare != nil || r.ident != nil {
		t.Fatalf("rare = %+v, ident = %+v, want nil", r.rare, r.ident)
	}
	if got := r.Expand(); !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip: got %+v, want %+v", got, m)
	}
	if got := unsafe.Sizeof(Entry{}); got > 160 {
		t.Fatalf("memEntry is %d bytes, want at most 160 (a size class)", got)
	}
}
