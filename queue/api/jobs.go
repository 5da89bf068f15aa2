package api

// JobAccepted answers POST /api/v1/jobs (202): the job's id and where to follow it.
type JobAccepted struct {
	ID    int64  `json:"id"`
	Kind  string `json:"kind"`
	State string `json:"state"`
	Href  string `json:"href"`
}

// JobCancelled answers POST /api/v1/jobs/{id}/cancel.
type JobCancelled struct {
	ID    int64  `json:"id"`
	State string `json:"state"`
}
