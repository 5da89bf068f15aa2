package worker

import (
	"errors"
	"fmt"

	zmq "github.com/pebbe/zmq4"
)

// Curve is what a worker needs to reach a dispatcher that runs with CURVE on: the dispatcher's
// public key, and the worker's own key pair, whose public key the operator has allowed
// (cortexq keys allow). Keys are Z85-encoded (40 characters), as zmq.NewCurveKeypair makes
// them. Replicas serving one fleet share one server key pair.
type Curve struct {
	// ServerKey is the dispatcher's public key.
	ServerKey string
	// PublicKey is the worker's public key; empty derives it from SecretKey.
	PublicKey string
	// SecretKey is the worker's secret key.
	SecretKey string
}

// apply makes s a CURVE client with c's keys; a nil c leaves s plain.
func (c *Curve) apply(s *zmq.Socket) error {
	if c == nil {
		return nil
	}
	if !zmq.HasCurve() {
		return errors.New("curve: this libzmq was built without CURVE")
	}
	pub := c.PublicKey
	if pub == "" && len(c.SecretKey) == 40 {
		var err error
		if pub, err = zmq.AuthCurvePublic(c.SecretKey); err != nil {
			return fmt.Errorf("curve: derive the public key: %w", err)
		}
	}
	for _, k := range []struct{ what, key string }{{"server key", c.ServerKey}, {"public key", pub}, {"secret key", c.SecretKey}} {
		if len(k.key) != 40 {
			return fmt.Errorf("curve: the %s is not a Z85-encoded CURVE key (40 characters)", k.what)
		}
	}
	for _, set := range []func() error{
		func() error { return s.SetCurveServerkey(c.ServerKey) },
		func() error { return s.SetCurvePublickey(pub) },
		func() error { return s.SetCurveSecretkey(c.SecretKey) },
	} {
		if err := set(); err != nil {
			return fmt.Errorf("curve: %w", err)
		}
	}
	return nil
}
