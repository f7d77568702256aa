package main

import "github.com/stratastream/strata/broker"

// loadBrokerConfig builds a broker configuration the way `strata broker`
// does: the properties file (if any), then the overrides on top, validated
// by broker.ConfigFromProperties. Errors name the file or the key.
func loadBrokerConfig(configFile string, overrides overrideFlag) (broker.Config, error) {
	props := map[string]string{}
	if configFile != "" {
		var err error
		if props, err = broker.ReadPropertiesFile(configFile); err != nil {
			return broker.Config{}, err
		}
	}
	for _, kv := range overrides {
		props[kv[0]] = kv[1]
	}
	return broker.ConfigFromProperties(props)
}
