package tiering

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// Broker settings that choose and configure the object store, by the names
// scripts and docs use. Credentials come from AWS_ACCESS_KEY_ID /
// AWS_SECRET_ACCESS_KEY or the rest of the standard AWS chain.
const (
	SettingS3Endpoint  = "remote.storage.s3.endpoint"
	SettingS3Bucket    = "remote.storage.s3.bucket"
	SettingS3Region    = "remote.storage.s3.region"
	SettingS3Prefix    = "remote.storage.s3.prefix"
	SettingS3PathStyle = "remote.storage.s3.path.style.access"
	SettingStorageDir  = "remote.storage.dir"
)

// StoreConfig chooses the broker's object store: S3 when an endpoint or a
// bucket is set (no endpoint: AWS), else the local directory Dir.
type StoreConfig struct {
	Dir string // remote.storage.dir
	S3  S3Config
}

// UsesS3 reports whether the configuration selects S3.
func (c StoreConfig) UsesS3() bool { return c.S3.Endpoint != "" || c.S3.Bucket != "" }

// OpenStore opens the store the configuration selects. It does not
// contact S3; call CheckStore for that.
func OpenStore(ctx context.Context, c StoreConfig) (ObjectStore, error) {
	if c.UsesS3() {
		if c.S3.Bucket == "" {
			return nil, fmt.Errorf("tiering: %s is set but %s is not", SettingS3Endpoint, SettingS3Bucket)
		}
		return NewS3Store(ctx, c.S3)
	}
	if c.Dir == "" {
		return nil, fmt.Errorf("tiering: neither %s nor %s is set", SettingStorageDir, SettingS3Bucket)
	}
	return NewLocalStore(c.Dir)
}

// CheckStore says in plain words whether the store can be used: for S3 as
// S3Store.Check does, for a directory whether a file can be written in it.
// The error wraps ErrUnavailable when retrying later may help.
func CheckStore(ctx context.Context, store ObjectStore) error {
	switch s := store.(type) {
	case *S3Store:
		return s.Check(ctx)
	case *LocalStore:
		return s.Check(ctx)
	}
	_, err := store.List(ctx, "strata-check/")
	return err
}

// Check reports whether a file can be created in the store's directory.
func (s *LocalStore) Check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f, err := os.CreateTemp(s.root, localTempPrefix+"check-*")
	if err != nil {
		return fmt.Errorf("%w: local directory %s: %w", ErrUnavailable, s.root, err)
	}
	return errors.Join(f.Close(), os.Remove(f.Name()))
}
