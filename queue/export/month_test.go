package export

import "testing"

func TestMonth(t *testing.T) {
	for entry, want := range map[string]string{
		"/c/1905/1905.12345/1905.12345.zip": "2019-05",
		"/c/1905.12345.zip":                 "2019-05",
		"/c/0704.0001v2.zip":                "2007-04",
		"/c/math/0211159.zip":               "2002-11",
		"/c/math/0211159/source.zip":        "2002-11",
		"/c/hep-th9901001.zip":              "1999-01",
		"/c/math.AG/9912001.zip":            "1999-12",
		"/c/paper.zip":                      "unknown",
		"/c/1913.12345.zip":                 "unknown", // no 13th month
		"/c/12345.zip":                      "unknown",
	} {
		if got := Month(entry); got != want {
			t.Errorf("Month(%q) = %q, want %q", entry, got, want)
		}
	}
}
