package main

import (
	"bufio"
	"encoding/json"
	"fmt"
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

// readWrites counts, by user, the write requests the API server received
// in [from, to) (to zero: no end).
func readWrites(file string, from, to time.Time) (map[string]writes, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	byUser := map[string]writes{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if ev.RequestReceived.Before(from) || (!to.IsZero() && !ev.RequestReceived.Before(to)) {
			continue
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
	}
	return byUser, sc.Err()
}

// lastWrite returns when the user's last write since from was received
// (zero: none).
func lastWrite(file, user string, from time.Time) (time.Time, error) {
	f, err := os.Open(file)
	if err != nil {
		return time.Time{}, err
	}
	defer f.Close()
	var last time.Time
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return last, fmt.Errorf("%s: %w", file, err)
		}
		if ev.User.Username == user && !ev.RequestReceived.Before(from) && ev.RequestReceived.After(last) {
			last = ev.RequestReceived
		}
	}
	return last, sc.Err()
}
