function remove_dir(d)
% caffe.test.remove_dir(d): deletes a test's temporary folder, quietly.

if exist(d, 'dir')
  if exist('confirm_recursive_rmdir', 'builtin') || ...
     exist('confirm_recursive_rmdir')
    confirm_recursive_rmdir(false, 'local');
  end
  rmdir(d, 's');
end
end
