package events

// ProviderFailing: a provider module on a machine keeps failing a consumer
// module, in the provider's newest word. Written under mesh.rp.<machine>,
// by the mesh report command or by the provider itself.
type ProviderFailing struct {
	Provider string `json:"provider"`
	Machine  string `json:"machine"`
	Consumer string `json:"consumer"`
	Word     string `json:"word"`
}

// ProviderRecovered: the provider on the machine serves the consumer again.
type ProviderRecovered struct {
	Provider string `json:"provider"`
	Machine  string `json:"machine"`
	Consumer string `json:"consumer"`
}

func (ProviderFailing) EventType() string   { return "ProviderFailing" }
func (ProviderRecovered) EventType() string { return "ProviderRecovered" }
