package nvmlclient

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// Some readings exist only as NVML field values (nvmlDeviceGetFieldValues):
// one call, a list of field ids, a return code and a typed value per field.

// readMemoryTemperature reads the memory's temperature, which nvidia-smi
// shows as temperature.memory (boards with HBM).
func (r *reading) readMemoryTemperature(s *Sample) {
	if r.skip(callMemoryTemperature) {
		return
	}
	if v, ret := fieldValue(r.d.handle, nvml.FI_DEV_MEMORY_TEMP); r.ok(callMemoryTemperature, ret) {
		s.MemoryTemperatureCelsius = some(v)
	}
}

// fieldValue reads one field. The call can succeed while the field fails:
// the field's own return code is the one that counts.
func fieldValue(h nvml.Device, id uint32) (float64, nvml.Return) {
	values := []nvml.FieldValue{{FieldId: id}}
	if ret := h.GetFieldValues(values); ret != nvml.SUCCESS {
		return 0, ret
	}
	if ret := nvml.Return(values[0].NvmlReturn); ret != nvml.SUCCESS {
		return 0, ret
	}
	v, ok := decodeSampleValue(nvml.ValueType(values[0].ValueType), values[0].Value)
	if !ok {
		// A value type this reader does not know: treat the field as
		// unsupported rather than report a wrong number.
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	return v, nvml.SUCCESS
}
