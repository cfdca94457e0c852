classdef Blob < handle
  % caffe.Blob: one blob of a caffe.Net, an activation (net.blobs('name'))
  % or a learnable parameter (net.params('layer', i)).
  %
  % Octave sees a blob with its shape reversed: Caffe's (num, channels,
  % height, width) is width x height x channels x num here, so that the
  % same memory, read column-major, is the same numbers (docs/matlab.md).
  % get_data/get_diff return single copies; set_data/set_diff copy in an
  % array of exactly the blob's size (any numeric class; converted to
  % single). shape/reshape use the reversed order too.

  % Hidden rather than private: Octave denies private access to objects
  % made before a `clear functions`, and delete() must still reach it.
  properties (Hidden, SetAccess = private)
    hBlob_self
  end

  methods
    function self = Blob(hBlob_blob)
      % caffe.Blob(handle) wraps a blob handle made by caffe.caffe_; with no
      % argument, an unbound object (only used to make empty Blob arrays).
      if nargin == 0
        return
      end
      if ~caffe.Net.is_handle(hBlob_blob)
        error('caffe:invalidHandle', 'caffe.Blob: invalid Blob handle');
      end
      self.hBlob_self = hBlob_blob;
    end

    function delete(self)
      % Releases this object's handle (see Note [Handle lifetime]).
      if ~isempty(self.hBlob_self)
        try
          caffe.caffe_('release', self.hBlob_self);
        catch
        end
      end
    end

    function shape = shape(self)
      % shape = blob.shape(): 1 x num_axes, Caffe's shape reversed.
      shape = caffe.caffe_('blob_get_shape', self.hBlob_self);
    end

    function reshape(self, shape)
      % blob.reshape(shape): shape in Octave's (reversed) order; call
      % net.reshape() afterwards to propagate it through the net.
      if ~(isnumeric(shape) && (isempty(shape) || isvector(shape)))
        error('caffe:invalidArgument', ...
              'caffe.Blob.reshape: shape must be a numeric vector');
      end
      caffe.caffe_('blob_reshape', self.hBlob_self, double(shape(:)'));
    end

    function data = get_data(self)
      data = caffe.caffe_('blob_get_data', self.hBlob_self);
    end

    function set_data(self, data)
      caffe.caffe_('blob_set_data', self.hBlob_self, ...
                   caffe.Blob.to_single(data, 'set_data'));
    end

    function diff = get_diff(self)
      diff = caffe.caffe_('blob_get_diff', self.hBlob_self);
    end

    function set_diff(self, diff)
      caffe.caffe_('blob_set_diff', self.hBlob_self, ...
                   caffe.Blob.to_single(diff, 'set_diff'));
    end
  end

  methods (Static, Hidden)
    function e = empty_array()
      % A 0 x 0 caffe.Blob array (Octave 7 has no caffe.Blob.empty()).
      b = caffe.Blob();
      e = b([]);
    end

    function data = to_single(data, what)
      if ~(isnumeric(data) || islogical(data)) || ~isreal(data)
        error('caffe:invalidArgument', ...
              'caffe.Blob.%s: data must be a real numeric array, got %s', ...
              what, class(data));
      end
      if ~isa(data, 'single')
        data = single(data);
      end
    end
  end
end
