// Package dbconv converts column values of the generated queries (sql/dbsqlc) to the queue's
// types, for the packages that read the same rows (queue/lease, queue/inspect).
package dbconv

import (
	"encoding/json"

	"github.com/cortexq/cortexq/queue"
)

// Messages decodes a JSON array of messages (dispatch.last_cause); NULL or malformed is none.
func Messages(raw json.RawMessage) []queue.Message {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var msgs []queue.Message
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return nil
	}
	return msgs
}

// StatusPtr converts a nullable status column.
func StatusPtr(st *int16) *queue.Status {
	if st == nil {
		return nil
	}
	s := queue.Status(*st)
	return &s
}
