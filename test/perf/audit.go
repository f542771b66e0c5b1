package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// auditEvent is what the harness reads of an audit log line.
type auditEvent struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
}

// writes counts write requests by "verb resource[/subresource]".
type writes map[string]int

func (w writes) total() int {
	n := 0
	for _, v := range w {
		n += v
	}
	return n
}

// String lists the counts, largest first.
func (w writes) String() string {
	keys := make([]string, 0, len(w))
	for k := range w {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if w[keys[i]] != w[keys[j]] {
			return w[keys[i]] > w[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, w[k])
	}
	return strings.Join(parts, ", ")
}

// heartbeatPrefix begins the name of the ConfigMap each operator process
// renews every 20 s (internal/operator/heartbeat), whatever the fleet does:
// the harness counts the writes the fleet costs.
const heartbeatPrefix = "cleanup-operator-heartbeat-"

// heartbeat says whether the event is a write of an operator's heartbeat.
func heartbeat(ev *auditEvent) bool {
	return ev.ObjectRef.Resource == "configmaps" && strings.HasPrefix(ev.ObjectRef.Name, heartbeatPrefix)
}

// readWrites counts, by user, the write requests the API server received
// in [from, to) (to zero: no end), heartbeats left out.
func readWrites(file string, from, to time.Time) (map[string]writes, error) {
	byUser := map[string]writes{}
	err := eachEvent(file, from, to, func(ev *auditEvent) {
		if heartbeat(ev) {
			return
		}
		res := ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			res += "/" + ev.ObjectRef.Subresource
		}
		key := ev.Verb + " " + res
		if ev.ResponseStatus.Code >= 300 {
			key += fmt.Sprintf(" (%d)", ev.ResponseStatus.Code)
		}
		if byUser[ev.User.Username] == nil {
			byUser[ev.User.Username] = writes{}
		}
		byUser[ev.User.Username][key]++
	})
	return byUser, err
}

// objectWrites counts the user's write requests received since from, by
// object ("resource[/subresource] namespace/name"), reading the log from
// offset (a size it had before from).
func objectWrites(file, user string, offset int64, from time.Time) (map[string]int, error) {
	out := map[string]int{}
	err := eachEventFrom(file, offset, from, time.Time{}, func(ev *auditEvent) {
		if ev.User.Username != user || heartbeat(ev) {
			return
		}
		res := ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			res += "/" + ev.ObjectRef.Subresource
		}
		out[res+" "+ev.ObjectRef.Namespace+"/"+ev.ObjectRef.Name]++
	})
	return out, err
}

// eachEvent calls fn with each complete line of the audit log whose
// request was received in [from, to) (to zero: no end).
func eachEvent(file string, from, to time.Time, fn func(*auditEvent)) error {
	return eachEventFrom(file, 0, from, to, fn)
}

// eachEventFrom is eachEvent reading the log from offset, the start of a
// line.
func eachEventFrom(file string, offset int64, from, to time.Time, fn func(*auditEvent)) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return err
	}
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return nil // EOF; a line the API server is still writing is left out
		}
		var ev auditEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		if ev.RequestReceived.Before(from) || (!to.IsZero() && !ev.RequestReceived.Before(to)) {
			continue
		}
		fn(&ev)
	}
}

// auditTail follows an audit log, reading each line once.
type auditTail struct {
	file string
	off  int64
	last map[string]time.Time // by user, the last write received
}

func newAuditTail(file string) *auditTail {
	return &auditTail{file: file, last: map[string]time.Time{}}
}

// lastWrite returns when the user's last write was received (zero: none
// yet), reading what the log gained since the last call.
func (a *auditTail) lastWrite(user string) (time.Time, error) {
	f, err := os.Open(a.file)
	if err != nil {
		return time.Time{}, err
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.Size() < a.off {
		a.off = 0 // rotated
	}
	if _, err := f.Seek(a.off, io.SeekStart); err != nil {
		return time.Time{}, err
	}
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			break // EOF; a partial line is read again next time
		}
		a.off += int64(len(line))
		var ev auditEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return time.Time{}, fmt.Errorf("%s: %w", a.file, err)
		}
		if ev.RequestReceived.After(a.last[ev.User.Username]) {
			a.last[ev.User.Username] = ev.RequestReceived
		}
	}
	return a.last[user], nil
}
