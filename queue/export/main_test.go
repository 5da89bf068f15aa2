package export_test

import (
	"testing"

	"github.com/cortexq/cortexq/queue/queuetest"
)

func TestMain(m *testing.M) { queuetest.Main(m) }
