package coord

import (
	"context"
	"fmt"
	"maps"
)

// The embedded coordinator keeps the finalized features in its file
// (localFile.Features, with their epoch), written atomically like the
// rest of it.

// FinalizedFeatures implements FeatureStore.
func (ss *LocalSession) FinalizedFeatures() (map[string]int16, int64) {
	s := ss.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.file.FeaturesEpoch == 0 && s.mu.file.Features == nil {
		return map[string]int16{}, -1 // a file written before features
	}
	return copyFeatures(s.mu.file.Features), s.mu.file.FeaturesEpoch
}

// WatchFeatures implements FeatureStore.
func (ss *LocalSession) WatchFeatures() (<-chan struct{}, func()) {
	return ss.store.featureWatchers.watch()
}

// AlterFinalizedFeatures implements FeatureStore.
func (ss *LocalSession) AlterFinalizedFeatures(ctx context.Context, fn func(cur map[string]int16) (map[string]int16, error)) error {
	s := ss.store
	for attempt := 0; attempt < 20; attempt++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("coord: alter features: %w", err)
		}
		s.mu.Lock()
		if err := ss.checkLocked(); err != nil {
			s.mu.Unlock()
			return err
		}
		cur, epoch := maps.Clone(s.mu.file.Features), s.mu.file.FeaturesEpoch
		s.mu.Unlock()
		next, err := fn(copyFeatures(cur))
		if err != nil {
			return err
		}
		s.mu.Lock()
		if err := ss.checkLocked(); err != nil {
			s.mu.Unlock()
			return err
		}
		if s.mu.file.FeaturesEpoch != epoch {
			s.mu.Unlock()
			continue
		}
		f := s.mu.file
		f.Features, f.FeaturesEpoch = cleanFeatures(next), epoch+1
		if err := s.persistLocked(&f, s.mu.topics); err != nil {
			s.mu.Unlock()
			return err
		}
		s.mu.file = f
		s.mu.Unlock()
		s.featureWatchers.notify()
		return nil
	}
	return fmt.Errorf("%w: features: writers kept conflicting", ErrVersionConflict)
}
