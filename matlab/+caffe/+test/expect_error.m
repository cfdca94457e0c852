function err = expect_error(fn, id, substrings)
% err = caffe.test.expect_error(fn, id, substrings)
%   Calls fn(), which must fail with an Octave error whose identifier is
%   `id` and whose message contains each of `substrings` (a string or a
%   cell of strings); returns that error. Fails otherwise.

if nargin < 3
  substrings = {};
elseif ischar(substrings)
  substrings = {substrings};
end
try
  fn();
catch err
  if ~strcmp(err.identifier, id)
    error('caffe:testFailed', 'expected error %s, got %s: %s', id, ...
          err.identifier, err.message);
  end
  for i = 1:numel(substrings)
    if isempty(strfind(err.message, substrings{i}))
      error('caffe:testFailed', ...
            'error %s: message "%s" does not mention "%s"', id, ...
            err.message, substrings{i});
    end
  end
  return
end
error('caffe:testFailed', 'expected error %s, but the call succeeded', id);
end
