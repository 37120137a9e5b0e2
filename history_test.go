package bgtask

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bgtask/bgtask/bgtype"
)

func TestMessageLogKeepsTheLast(t *testing.T) {
	var l messageLog
	var ids []string
	for i := range messagesPerTask + 5 {
		ids = append(ids, l.add("task_a", MessageIn, bgtype.Message{From: "o", Content: fmt.Sprint(i)}))
	}
	got := l.list("task_a")
	if len(got) != messagesPerTask {
		t.Fatalf("%d records", len(got))
	}
	for i, r := range got {
		if r.Content != fmt.Sprint(i+5) || r.ID != ids[i+5] || r.Direction != MessageIn || r.From != "o" {
			t.Fatalf("record %d: %+v", i, r)
		}
		if i > 0 && r.ID <= got[i-1].ID {
			t.Fatalf("ids out of order: %s, %s", got[i-1].ID, r.ID)
		}
	}
	if want := 5*1 + 15*2; l.bytes != want { // "5".."9" and "10".."24" are kept
		t.Fatalf("bytes %d, want %d", l.bytes, want)
	}
	if got := l.list("task_b"); got == nil || len(got) != 0 {
		t.Fatalf("unknown task: %#v", got)
	}
}

func TestMessageLogTruncates(t *testing.T) {
	var l messageLog
	long := strings.Repeat("é", messageContentMax) // 2 bytes each
	l.add("task_a", MessageOut, bgtype.Message{Content: long})
	l.add("task_a", MessageOut, bgtype.Message{Content: long[:messageContentMax]})
	got := l.list("task_a")
	if r := got[0]; !r.Truncated || len(r.Content) != messageContentMax || !utf8.ValidString(r.Content) || !strings.HasPrefix(long, r.Content) {
		t.Fatalf("truncated record: %d bytes, truncated %v", len(r.Content), r.Truncated)
	}
	if r := got[1]; r.Truncated || len(r.Content) != messageContentMax {
		t.Fatalf("record at the limit: %d bytes, truncated %v", len(r.Content), r.Truncated)
	}
	odd := "x" + long
	l.add("task_b", MessageIn, bgtype.Message{Content: odd})
	if r := l.list("task_b")[0]; len(r.Content) != messageContentMax-1 || !utf8.ValidString(r.Content) {
		t.Fatalf("cut inside a rune: %d bytes", len(r.Content))
	}
}

func TestMessageLogBounded(t *testing.T) {
	t.Run("tasks", func(t *testing.T) {
		var l messageLog
		for i := range messageTasks + 1 {
			l.add(fmt.Sprintf("task_%d", i), MessageIn, bgtype.Message{Content: "x"})
		}
		if len(l.byTask) != messageTasks || len(l.list("task_0")) != 0 || len(l.list("task_1")) != 1 || l.bytes != messageTasks {
			t.Fatalf("%d histories, %d bytes", len(l.byTask), l.bytes)
		}
		// A history that keeps growing is never the one evicted for itself.
		l.add("task_1", MessageIn, bgtype.Message{Content: "y"})
		if len(l.list("task_1")) != 2 {
			t.Fatal("task_1 lost its history")
		}
	})
	t.Run("bytes", func(t *testing.T) {
		var l messageLog
		big := strings.Repeat("b", messageContentMax)
		n := messageBytesMax / messageContentMax
		for i := range n + 1 {
			l.add(fmt.Sprintf("task_%d", i), MessageIn, bgtype.Message{Content: big})
		}
		if len(l.byTask) != n || len(l.list("task_0")) != 0 || l.bytes != messageBytesMax {
			t.Fatalf("%d histories, %d bytes", len(l.byTask), l.bytes)
		}
	})
}

// TestMessagesInAndOut: a sub-agent's history has the messages sent to it
// and its replies, in order, as Owner.Messages and get_task show them.
func TestMessagesInAndOut(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	id, err := o.SpawnAgent(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
		for range 3 {
			if err := tk.Inbox().Wait(ctx); err != nil {
				return nil, err
			}
			for _, ev := range tk.Inbox().Drain() {
				msg, _ := ev.Message()
				if err := tk.Emit(bgtype.EventTypeMessage, bgtype.Message{From: tk.ID(), Content: "re: " + msg.Content}); err != nil {
					return nil, err
				}
			}
		}
		return nil, tk.Emit(bgtype.EventTypeMessage, "bye") // a plain string is the content
	})
	if err != nil {
		t.Fatal(err)
	}
	ib, _ := o.Inbox()
	for i := range 3 {
		if _, err := o.Send(t.Context(), id, bgtype.Message{From: "thread-1", Content: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
		if err := ib.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		ib.Drain()
	}
	waitTask(t, o, id)
	msgs, err := o.Messages(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range msgs {
		got = append(got, r.Direction+":"+r.From+":"+r.Content)
	}
	want := []string{"in:thread-1:0", "out:" + id + ":re: 0", "in:thread-1:1", "out:" + id + ":re: 1", "in:thread-1:2", "out:" + id + ":re: 2", "out:" + id + ":bye"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("history\n%v\nwant\n%v", got, want)
	}
	if _, err := o.Messages(t.Context(), "task_nope"); err == nil {
		t.Fatal("Messages of an unknown task")
	}
}
